// `npm run generate`: writes src/generated/openapi.ts from the service's
// OpenAPI document, read from the URL or file path in TOCSIN_OPENAPI.
//
//   TOCSIN_OPENAPI=http://127.0.0.1:8080/openapi.json npm run generate
//   TOCSIN_OPENAPI=./openapi.json npm run generate
//
// TOCSIN_API_KEY is sent as a bearer token when set. TOCSIN_OPENAPI_OUT
// writes somewhere else than src/generated/openapi.ts (to compare by hand).

import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { GENERATED_FILE, generateTypes, loadDocument } from "./openapi.mjs";

const source = process.env.TOCSIN_OPENAPI;
if (!source) {
  console.error(
    "TOCSIN_OPENAPI is not set. Point it at the service's document, e.g.\n" +
      "  TOCSIN_OPENAPI=http://127.0.0.1:8080/openapi.json npm run generate",
  );
  process.exit(2);
}

// npm runs scripts in the package folder; relative paths mean the caller's folder.
const cwd = process.env.INIT_CWD ?? process.cwd();

try {
  const text = await generateTypes(await loadDocument(source, { apiKey: process.env.TOCSIN_API_KEY, cwd }));
  const out = process.env.TOCSIN_OPENAPI_OUT
    ? resolve(cwd, process.env.TOCSIN_OPENAPI_OUT)
    : fileURLToPath(GENERATED_FILE);
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, text);
  console.log(`wrote ${out} from ${source}`);
} catch (error) {
  console.error(`npm run generate failed: ${error.message}`);
  process.exit(1);
}
