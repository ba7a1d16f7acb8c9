// Integration test harness: a real ingest process on a free port with its own
// data directory, API keys made with its admin command, and the client as a
// user gets it (npm pack, installed from the tarball into a scratch project).

import { execFile, spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

export const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The ingest binary: $INGEST_BIN, or the debug build of the workspace. Throws (never skips) when it is missing. */
export function ingestBinary() {
  const bin = process.env.INGEST_BIN
    ? resolve(process.env.INGEST_BIN)
    : resolve(PACKAGE_ROOT, "../../target/debug/ingest");
  if (!existsSync(bin)) {
    throw new Error(
      `ingest binary not found at ${bin}. ` +
        "Build it first (`cargo build --workspace --bins` in the repository root) or set INGEST_BIN to its path. " +
        "The integration tests need a real ingest process and do not skip without one.",
    );
  }
  return bin;
}

/**
 * The caller's environment without INGEST_* variables. ingest reads every
 * INGEST_* variable as a setting and refuses unknown ones, so INGEST_BIN
 * (which only this harness reads) would stop it from starting; and a setting
 * left in the caller's shell (INGEST_MONGODB_URI…) must not turn the test's
 * embedded server into something else.
 */
function ingestFreeEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("INGEST_")));
}

/** A loopback port nothing listens on (at the moment of asking). */
export async function freePort() {
  const server = createServer();
  await new Promise((ok, fail) => server.once("error", fail).listen(0, "127.0.0.1", ok));
  const { port } = server.address();
  await new Promise((ok) => server.close(ok));
  return port;
}

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

/**
 * Starts ingest in embedded mode and waits for `GET /healthz` 200.
 * `settings` adds INGEST_* variables (e.g. `{ INGEST_CORS_ORIGINS: "…" }`).
 * Returns `{ baseUrl, createKey(options?), restart(), stop(), log() }`.
 */
export async function startIngest(settings = {}) {
  const bin = ingestBinary();
  const dataDir = await mkdtemp(join(tmpdir(), "tocsin-ingest-"));
  const port = await freePort();
  const env = { ...ingestFreeEnv(), ...settings, INGEST_LISTEN: `127.0.0.1:${port}`, INGEST_DATA_DIR: dataDir };
  const baseUrl = `http://127.0.0.1:${port}`;

  let log = "";
  let server = spawnServer(bin, env, (chunk) => {
    log = (log + chunk).slice(-20_000); // enough to explain a failure
  });

  const stop = async () => {
    await server.kill();
    await rm(dataDir, { recursive: true, force: true });
  };

  try {
    await waitForHealth(baseUrl, server.isRunning, () => log);
  } catch (error) {
    await stop();
    throw error;
  }

  /**
   * Stops the process and starts a new one on the same port and data
   * directory (same SQLite file): open connections drop, stored data stays.
   */
  const restart = async () => {
    await server.kill();
    log += "\n--- restart ---\n";
    server = spawnServer(bin, env, (chunk) => {
      log = (log + chunk).slice(-20_000);
    });
    await waitForHealth(baseUrl, server.isRunning, () => log);
  };

  /**
   * `ingest keys create --org o --project p [--rate-limit N] [--scopes a,b]`,
   * with the server's env so it shares the data dir. Every scope by default.
   */
  const createKey = async ({ rateLimit, scopes } = {}) => {
    const args = ["keys", "create", "--org", "o", "--project", "p"];
    if (rateLimit !== undefined) args.push("--rate-limit", String(rateLimit));
    if (scopes !== undefined) args.push("--scopes", scopes.join(","));
    const { stdout } = await run(bin, args, { env }).catch((error) => {
      throw new Error(`\`ingest ${args.join(" ")}\` failed: ${error.stderr || error.message}`);
    });
    const key = stdout.trim();
    if (!key || /\s/.test(key)) throw new Error(`\`ingest ${args.join(" ")}\` should print the key alone, printed: ${JSON.stringify(stdout)}`);
    return key;
  };

  return { baseUrl, createKey, restart, stop, log: () => log };
}

/** Spawns one ingest process. `kill()` stops it (SIGTERM, then SIGKILL after 5 s) and resolves once it exited. */
function spawnServer(bin, env, onOutput) {
  const child = spawn(bin, [], { env, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  let running = true;
  const exited = new Promise((ok) =>
    child.once("exit", (code, signal) => {
      running = false;
      ok({ code, signal });
    }),
  );
  const kill = async () => {
    if (!running) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return { kill, isRunning: () => running };
}

async function waitForHealth(baseUrl, isRunning, log, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (!isRunning()) throw new Error(`ingest exited before it was healthy. Its output:\n${log()}`);
    try {
      const response = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) });
      if (response.status === 200) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = error.cause?.code ?? error.message;
    }
    await sleep(100);
  }
  throw new Error(`GET ${baseUrl}/healthz did not answer 200 within ${timeoutMs} ms (last: ${last}). Its output:\n${log()}`);
}

function npm(args, options) {
  // Under `npm run`, npm_execpath is the npm that runs us; otherwise the one on PATH.
  const cli = process.env.npm_execpath;
  return cli && cli.endsWith(".js")
    ? run(process.execPath, [cli, ...args], options)
    : run("npm", args, options);
}

/**
 * Packs the package (`prepack` builds it), installs the tarball into a scratch
 * project and loads it from there through the exports map, once as ESM and
 * once with require. Returns `{ esm, cjs, tarball, cleanup() }`.
 */
export async function installPackedClient() {
  const dir = await mkdtemp(join(tmpdir(), "tocsin-client-"));
  const packDir = join(dir, "pack");
  const appDir = join(dir, "app");
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    await mkdir(packDir, { recursive: true });
    await npm(["pack", "--pack-destination", packDir], { cwd: PACKAGE_ROOT });
    const tarballs = readdirSync(packDir).filter((name) => name.endsWith(".tgz"));
    if (tarballs.length !== 1) throw new Error(`npm pack made ${tarballs.length} tarballs in ${packDir}`);
    const tarball = join(packDir, tarballs[0]);

    await mkdir(appDir, { recursive: true });
    await writeFile(join(appDir, "package.json"), JSON.stringify({ name: "tocsin-client-it", private: true, type: "module" }));
    // No runtime dependencies, so this never needs the registry.
    await npm(["install", tarball, "--offline", "--no-audit", "--no-fund", "--no-package-lock"], { cwd: appDir });
    await writeFile(join(appDir, "esm.mjs"), 'export * from "@tocsin/client";\n');
    await writeFile(join(appDir, "cjs.cjs"), 'module.exports = require("@tocsin/client");\n');

    const esm = await import(pathToFileURL(join(appDir, "esm.mjs")).href);
    const cjs = createRequire(join(appDir, "cjs.cjs"))("./cjs.cjs");
    return { esm, cjs, tarball, installedAt: join(appDir, "node_modules/@tocsin/client"), cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Wraps the global fetch to count calls (to prove what was and was not retried). */
export function countingFetch() {
  const counter = { calls: 0 };
  counter.fetch = (url, init) => {
    counter.calls++;
    return fetch(url, init);
  };
  return counter;
}
