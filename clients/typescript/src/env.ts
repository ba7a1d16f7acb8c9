// Reading TOCSIN_* environment variables where the runtime has an
// environment (Node, Bun, Deno). A browser has none: every variable reads as
// unset there, and nothing here needs Node.

type ProcessLike = { env?: Record<string, string | undefined> };
type DenoLike = { env?: { get?(name: string): string | undefined } };

/** The variable's value, trimmed; undefined when it is unset, blank or cannot be read. */
export function readEnv(name: string): string | undefined {
  const runtime = globalThis as { process?: ProcessLike; Deno?: DenoLike };
  let value: string | undefined;
  try {
    value = runtime.process?.env?.[name] ?? runtime.Deno?.env?.get?.(name);
  } catch {
    // Deno without --allow-env throws: a variable the program may not read is unset for it.
    return undefined;
  }
  const trimmed = value?.trim();
  return trimmed === "" ? undefined : trimmed;
}
