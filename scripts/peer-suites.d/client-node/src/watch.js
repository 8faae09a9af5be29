// Ours, not upstream's: the vendored integration tests import '../../watch.js'.
export { Watch } from '@kubernetes/client-node';
