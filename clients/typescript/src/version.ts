// The package's version, for the client identification headers. The built
// code cannot read package.json (in a browser there is no file to read), so
// it is written here too; a unit test fails when the two differ.

export const VERSION = "0.1.0";
