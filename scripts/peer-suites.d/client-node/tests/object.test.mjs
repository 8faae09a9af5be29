// Ours: KubernetesObjectApi, the client's generic API: it finds each kind's resource through
// discovery, then creates, reads, lists, patches (each patch type), replaces and deletes.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { config, eventually, refused, uniqueName } from './helpers.mjs';

const kc = config();
const client = k8s.KubernetesObjectApi.makeApiClient(kc);

test('a namespaced kind: create, read, list, patch, replace, delete', async () => {
    const run = uniqueName('obj');
    const name = `${run}-svc`;
    const spec = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, labels: { run } },
        spec: { selector: { app: run }, ports: [{ name: 'http', port: 80 }] },
    };
    const created = await client.create(spec);
    // The namespace is the context's.
    assert.equal(created.metadata.namespace, 'default');
    assert.equal(created.spec.type, 'ClusterIP');
    assert.ok(created.spec.clusterIP);
    const read = await client.read({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' } });
    assert.equal(read.metadata.uid, created.metadata.uid);
    const list = await client.list('v1', 'Service', 'default', undefined, undefined, undefined, undefined, `run=${run}`);
    assert.equal(list.kind, 'ServiceList');
    assert.deepEqual(list.items.map((s) => s.metadata.name), [name]);
    // The default patch: strategic merge (ports merge by port).
    const patched = await client.patch({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace: 'default' },
        spec: { ports: [{ name: 'https', port: 443 }] },
    });
    assert.deepEqual(patched.spec.ports.map((p) => p.port).sort(), [443, 80]);
    const merged = await client.patch(
        { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default', labels: { merged: 'yes' } } },
        undefined,
        undefined,
        undefined,
        undefined,
        k8s.PatchStrategy.MergePatch,
    );
    assert.equal(merged.metadata.labels.merged, 'yes');
    const applied = await client.patch(
        { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default', annotations: { applied: 'yes' } } },
        undefined,
        undefined,
        'peer-object-applier',
        true,
        k8s.PatchStrategy.ServerSideApply,
    );
    assert.equal(applied.metadata.annotations.applied, 'yes');
    applied.metadata.labels.replaced = 'yes';
    const replaced = await client.replace(applied);
    assert.equal(replaced.metadata.labels.replaced, 'yes');
    // A service's delete answers the deleted Service, not a Status (kube's service storage
    // sets ReturnDeletedObject); the client reads any answer as a V1Status.
    const deleted = await client.delete({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' } });
    assert.equal(deleted.kind, 'Service');
    await refused(client.read({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' } }), 404, 'NotFound');
});

test('a cluster-scoped kind of a group: create, read, dry run, delete', async () => {
    const name = uniqueName('obj-pc');
    const spec = {
        apiVersion: 'scheduling.k8s.io/v1',
        kind: 'PriorityClass',
        metadata: { name },
        value: 1000,
        description: 'peer-suites',
    };
    const dry = await client.create(spec, undefined, 'All');
    assert.equal(dry.metadata.name, name);
    await refused(client.read({ apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name } }), 404);
    const created = await client.create(spec);
    assert.equal(created.value, 1000);
    assert.equal(created.preemptionPolicy, 'PreemptLowerPriority');
    const read = await client.read({ apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name } });
    assert.equal(read.description, 'peer-suites');
    await client.delete({ apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name } });
});

test('delete with a propagation policy; a kind discovery does not know', async () => {
    const name = uniqueName('obj-deploy');
    await client.create({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name },
        spec: {
            selector: { matchLabels: { app: name } },
            template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
        },
    });
    const status = await client.delete(
        { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name } },
        undefined,
        undefined,
        0,
        undefined,
        'Foreground',
    );
    // A foreground delete answers the object, marked for deletion with the finalizer (the
    // client reads it as a V1Status, which keeps its kind only); the garbage collector then
    // removes the finalizer, there being no dependents, and the object is gone.
    assert.equal(status.kind, 'Deployment');
    await eventually('the deployment gone', async () => {
        await refused(client.read({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name, namespace: 'default' } }), 404);
        return true;
    });
    await assert.rejects(
        client.read({ apiVersion: 'apps/v1', kind: 'NoSuchKind', metadata: { name } }),
        /Unrecognized API version and kind: apps\/v1 NoSuchKind/,
    );
});
