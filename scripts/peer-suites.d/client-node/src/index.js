// Ours, not upstream's: the vendored integration tests import the client's sources as
// '../../index.js'; here that is the pinned npm release.
export * from '@kubernetes/client-node';
