// Ours: makeInformer, the client's informer (ListWatch): the first list, then the watch from
// its resourceVersion; add, update, delete and its cache; a restart that watches from the
// resourceVersion it had, and the relist when that one is gone (410).
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { config, signal, uniqueName } from './helpers.mjs';

const namespace = 'default';

function informerOf(kc, run) {
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const labelSelector = `run=${run}`;
    const informer = k8s.makeInformer(
        kc,
        `/api/v1/namespaces/${namespace}/configmaps`,
        () => core.listNamespacedConfigMap({ namespace, labelSelector }),
        labelSelector,
    );
    const log = [];
    const waiting = [];
    const record = (verb) => (obj) => {
        log.push(`${verb} ${obj.metadata.name}`);
        for (const w of waiting) if (log.includes(w.line)) w.resolve();
    };
    informer.on('add', record('add'));
    informer.on('update', record('update'));
    informer.on('delete', record('delete'));
    // The errors the informer reports, but the AbortError of its own watch that stop() aborts.
    const errors = [];
    informer.on('error', (err) => {
        if (err?.name !== 'AbortError') errors.push(err);
    });
    const saw = (line) => {
        if (log.includes(line)) return Promise.resolve();
        const s = signal(line);
        waiting.push({ line, resolve: s.resolve });
        return s.promise;
    };
    return { core, informer, log, errors, saw };
}

test('informer: list, then add, update, delete from the watch; its cache', async () => {
    const kc = config();
    const run = uniqueName('inf');
    const { core, informer, log, errors, saw } = informerOf(kc, run);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-listed`, labels: { run } } } });
    await informer.start();
    // start() resolves once the list is in the cache.
    assert.deepEqual(log, [`add ${run}-listed`]);
    const listedVersion = informer.latestResourceVersion();
    assert.ok(listedVersion);
    const name = `${run}-watched`;
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { run } }, data: { v: '1' } } });
    await saw(`add ${name}`);
    await core.patchNamespacedConfigMap(
        { name, namespace, body: { data: { v: '2' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await saw(`update ${name}`);
    assert.equal(informer.get(name, namespace).data.v, '2');
    assert.deepEqual(informer.list(namespace).map((cm) => cm.metadata.name).sort(), [`${run}-listed`, name]);
    // A label change that takes it out of the selector: deleted for this informer.
    await core.patchNamespacedConfigMap(
        { name: `${run}-listed`, namespace, body: { metadata: { labels: { run: 'elsewhere' } } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await saw(`delete ${run}-listed`);
    await core.deleteNamespacedConfigMap({ name, namespace });
    await saw(`delete ${name}`);
    assert.deepEqual(informer.list(namespace), []);
    assert.ok(BigInt(informer.latestResourceVersion()) > BigInt(listedVersion));
    await informer.stop();
    assert.deepEqual(errors, []);
    assert.deepEqual(log, [`add ${run}-listed`, `add ${name}`, `update ${name}`, `delete ${run}-listed`, `delete ${name}`]);
    await core.deleteNamespacedConfigMap({ name: `${run}-listed`, namespace });
});

test('informer: stopped, then started again, it watches on from where it was', async () => {
    const kc = config();
    const run = uniqueName('inf-resume');
    const { core, informer, log, errors, saw } = informerOf(kc, run);
    await informer.start();
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-a`, labels: { run } } } });
    await saw(`add ${run}-a`);
    await informer.stop();
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-b`, labels: { run } } } });
    await core.deleteNamespacedConfigMap({ name: `${run}-a`, namespace });
    await informer.start();
    await saw(`add ${run}-b`);
    await saw(`delete ${run}-a`);
    await informer.stop();
    assert.deepEqual(errors, []);
    assert.deepEqual(log, [`add ${run}-a`, `add ${run}-b`, `delete ${run}-a`]);
    await core.deleteNamespacedConfigMap({ name: `${run}-b`, namespace });
});

test('informer: started again after its resourceVersion left the history: 410, relist', async () => {
    const kc = config('watchkeeper-small-history');
    const run = uniqueName('inf-relist');
    const { core, informer, log, errors, saw } = informerOf(kc, run);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-kept`, labels: { run } } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-gone`, labels: { run } } } });
    await informer.start();
    await informer.stop();
    const stale = informer.latestResourceVersion();
    // Enough writes that the history no longer reaches back to `stale`.
    await core.deleteNamespacedConfigMap({ name: `${run}-gone`, namespace });
    for (let i = 0; i < 20; i++) {
        await core.createNamespacedConfigMap({
            namespace,
            body: { metadata: { name: `${run}-other-${i}` }, data: { pad: 'x'.repeat(200) } },
        });
    }
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-new`, labels: { run } } } });
    await informer.start();
    // The watch at `stale` gets 410: the informer lists again, and the list tells it what
    // changed meanwhile.
    await saw(`add ${run}-new`);
    await saw(`delete ${run}-gone`);
    assert.ok(BigInt(informer.latestResourceVersion()) > BigInt(stale));
    assert.deepEqual(informer.list(namespace).map((cm) => cm.metadata.name).sort(), [`${run}-kept`, `${run}-new`]);
    // And it watches from the new list's resourceVersion.
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-after`, labels: { run } } } });
    await saw(`add ${run}-after`);
    await informer.stop();
    assert.deepEqual(errors, []);
    assert.deepEqual(log.slice(0, 2).sort(), [`add ${run}-gone`, `add ${run}-kept`]);
    await core.deleteCollectionNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
});
