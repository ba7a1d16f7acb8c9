// The package is "type": "module", so without this marker Node would read the
// CommonJS build in dist/cjs as ES modules and fail on `exports`.
import { writeFileSync } from "node:fs";

writeFileSync(
  new URL("../dist/cjs/package.json", import.meta.url),
  JSON.stringify({ type: "commonjs" }, null, 2) + "\n",
);
