// The committed generated types must match the service's /openapi.json.
//
// The document comes from TOCSIN_OPENAPI (URL or file path) when set;
// otherwise this starts the ingest binary (see helpers.mjs) and reads its
// /openapi.json. Fails when the file is missing or differs.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";

import { GENERATED_FILE, checkDrift, loadDocument } from "../../scripts/openapi.mjs";
import { startIngest } from "./helpers.mjs";

let ingest;
after(async () => {
  await ingest?.stop();
});

test("src/generated/openapi.ts matches the service's OpenAPI document", async () => {
  let source = process.env.TOCSIN_OPENAPI;
  let apiKey = process.env.TOCSIN_API_KEY;
  if (!source) {
    ingest = await startIngest();
    apiKey = await ingest.createKey();
    source = `${ingest.baseUrl}/openapi.json`;
  }

  const document = await loadDocument(source, { apiKey });
  assert.match(String(document.openapi), /^3\.1\./, "the service publishes OpenAPI 3.1");

  const { committed, generated, upToDate } = await checkDrift(document);
  const file = fileURLToPath(GENERATED_FILE);
  const fix = "Regenerate with `TOCSIN_OPENAPI=<url or file> npm run generate` and commit the result.";
  assert.notEqual(committed, null, `${file} does not exist yet. ${fix}`);
  if (!upToDate) {
    // assert.equal prints a diff of the two texts.
    assert.equal(committed, generated, `${file} is out of date with ${source}. ${fix}`);
  }
});
