// Ours, not upstream's: runs one of the vendored integration tests (upstream's
// src/test/integration/index.ts runs all five, two of which need a kubelet).
const name = process.argv[2];
const test = await import(`./integration/${name}.js`);
await test.default();
