// Ours: Watch, the client's raw watch: list then watch from the list's resourceVersion,
// every event type in order, bookmarks (a streaming list's initial-events-end one), and the
// 410 Expired ERROR event of a resourceVersion the server's history no longer holds.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { config, signal, uniqueName } from './helpers.mjs';

const kc = config();
const core = kc.makeApiClient(k8s.CoreV1Api);
const namespace = 'default';

// Collects a watch's events until `until` holds for them.
async function watchUntil(kcWatch, path, query, until, what) {
    const events = [];
    const seen = signal(what);
    const ended = signal(`${what}: the watch's end`);
    const controller = await new k8s.Watch(kcWatch).watch(
        path,
        query,
        (type, object, raw) => {
            events.push({ type, object, raw });
            if (until(events)) seen.resolve();
        },
        (err) => ended.resolve(err),
    );
    return { events, seen: seen.promise, ended: ended.promise, controller };
}

test('list, then watch from its resourceVersion: ADDED, MODIFIED, DELETED in order', async () => {
    const run = uniqueName('watch-run');
    const before = `${run}-before`;
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: before, labels: { run } } } });
    const list = await core.listNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
    assert.deepEqual(list.items.map((cm) => cm.metadata.name), [before]);
    const name = `${run}-watched`;
    const w = await watchUntil(
        kc,
        `/api/v1/namespaces/${namespace}/configmaps`,
        { labelSelector: `run=${run}`, resourceVersion: list.metadata.resourceVersion },
        (events) => events.some((e) => e.type === 'DELETED'),
        'DELETED',
    );
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { run } }, data: { v: '1' } } });
    await core.patchNamespacedConfigMap(
        { name, namespace, body: { data: { v: '2' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await core.deleteNamespacedConfigMap({ name, namespace });
    await w.seen;
    w.controller.abort();
    // The object there before the list is not sent again.
    assert.deepEqual(
        w.events.map((e) => `${e.type} ${e.object.metadata.name}`),
        [`ADDED ${name}`, `MODIFIED ${name}`, `DELETED ${name}`],
    );
    assert.equal(w.events[1].object.data.v, '2');
    const versions = w.events.map((e) => BigInt(e.object.metadata.resourceVersion));
    assert.ok(versions[0] > BigInt(list.metadata.resourceVersion) && versions[0] < versions[1] && versions[1] < versions[2]);
    await core.deleteNamespacedConfigMap({ name: before, namespace });
});

test('watch without a resourceVersion: the existing objects as ADDED first', async () => {
    const run = uniqueName('watch-existing');
    for (const i of [1, 2]) {
        await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-${i}`, labels: { run } } } });
    }
    const w = await watchUntil(
        kc,
        `/api/v1/namespaces/${namespace}/configmaps`,
        { labelSelector: `run=${run}` },
        (events) => events.length === 2,
        'two ADDED',
    );
    await w.seen;
    w.controller.abort();
    assert.deepEqual(w.events.map((e) => `${e.type} ${e.object.metadata.name}`).sort(), [`ADDED ${run}-1`, `ADDED ${run}-2`]);
    await core.deleteCollectionNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
});

test('a streaming list: initial events, then the initial-events-end BOOKMARK', async () => {
    const run = uniqueName('watch-stream');
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-a`, labels: { run } } } });
    const w = await watchUntil(
        kc,
        `/api/v1/namespaces/${namespace}/configmaps`,
        {
            labelSelector: `run=${run}`,
            allowWatchBookmarks: true,
            sendInitialEvents: true,
            resourceVersionMatch: 'NotOlderThan',
        },
        (events) => events.some((e) => e.type === 'BOOKMARK'),
        'the BOOKMARK',
    );
    await w.seen;
    w.controller.abort();
    assert.equal(w.events[0].type, 'ADDED');
    assert.equal(w.events[0].object.metadata.name, `${run}-a`);
    const bookmark = w.events[1];
    assert.equal(bookmark.type, 'BOOKMARK');
    assert.equal(bookmark.object.kind, 'ConfigMap');
    assert.equal(bookmark.object.metadata.annotations['k8s.io/initial-events-end'], 'true');
    assert.ok(BigInt(bookmark.object.metadata.resourceVersion) >= BigInt(w.events[0].object.metadata.resourceVersion));
    // The watch callback's third argument is the whole event.
    assert.equal(bookmark.raw.type, 'BOOKMARK');
    await core.deleteNamespacedConfigMap({ name: `${run}-a`, namespace });
});

test('a watch that ends at its timeoutSeconds calls done without an error', async () => {
    const w = await watchUntil(
        kc,
        `/api/v1/namespaces/${namespace}/configmaps`,
        { timeoutSeconds: 1, labelSelector: `run=${uniqueName('watch-timeout')}` },
        () => false,
        'nothing',
    );
    const err = await w.ended;
    assert.equal(err, null);
});

test('a resourceVersion the history no longer holds: ERROR 410 Expired, then the end', async () => {
    // The context of a server whose histories hold only their last few revisions.
    const small = config('watchkeeper-small-history');
    const api = small.makeApiClient(k8s.CoreV1Api);
    const run = uniqueName('watch-gone');
    const first = await api.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${run}-0`, labels: { run } } } });
    for (let i = 1; i <= 20; i++) {
        await api.createNamespacedConfigMap({
            namespace,
            body: { metadata: { name: `${run}-${i}`, labels: { run } }, data: { pad: 'x'.repeat(200) } },
        });
    }
    const w = await watchUntil(
        small,
        `/api/v1/namespaces/${namespace}/configmaps`,
        { resourceVersion: first.metadata.resourceVersion },
        (events) => events.some((e) => e.type === 'ERROR'),
        'the ERROR event',
    );
    await w.seen;
    const err = await w.ended;
    assert.equal(err, null);
    const error = w.events.find((e) => e.type === 'ERROR').object;
    assert.equal(error.kind, 'Status');
    assert.equal(error.apiVersion, 'v1');
    assert.equal(error.status, 'Failure');
    assert.equal(error.code, 410);
    assert.equal(error.reason, 'Expired');
    assert.match(error.message, /^too old resource version: \d+ \(\d+\)$/);
    await api.deleteCollectionNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
});

test('a watch refused before it starts: done gets the HTTP status', async () => {
    const w = await watchUntil(kc, `/api/v1/namespaces/${namespace}/nosuchresources`, {}, () => false, 'nothing');
    const err = await w.ended;
    assert.equal(err.statusCode, 404);
});
