// Ours, not upstream's: the vendored integration tests import '../../cache.js'.
export { ListWatch } from '@kubernetes/client-node';
