// Ours: the typed API classes' verbs (CoreV1Api, AppsV1Api): create, read, list (selectors,
// pages), replace, the four patch types, delete, and kube's Status for what they refuse.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { config, refused, uniqueName } from './helpers.mjs';

const kc = config();
const core = kc.makeApiClient(k8s.CoreV1Api);
const apps = kc.makeApiClient(k8s.AppsV1Api);
const namespace = 'default';

test('configmap: create, read, replace, delete', async () => {
    const name = uniqueName('typed-cm');
    const created = await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name, labels: { suite: 'typed' } }, data: { a: '1' } },
    });
    assert.equal(created.metadata.name, name);
    assert.ok(created.metadata.uid);
    assert.ok(created.metadata.resourceVersion);
    assert.ok(created.metadata.creationTimestamp instanceof Date);
    const read = await core.readNamespacedConfigMap({ name, namespace });
    assert.deepEqual(read.data, { a: '1' });
    read.data = { a: '2', b: '3' };
    const replaced = await core.replaceNamespacedConfigMap({ name, namespace, body: read });
    assert.deepEqual(replaced.data, { a: '2', b: '3' });
    assert.notEqual(replaced.metadata.resourceVersion, created.metadata.resourceVersion);
    // A replace at the old resourceVersion conflicts.
    await refused(
        core.replaceNamespacedConfigMap({ name, namespace, body: { ...read, metadata: created.metadata } }),
        409,
        'Conflict',
    );
    const deleted = await core.deleteNamespacedConfigMap({ name, namespace });
    assert.equal(deleted.kind, 'Status');
    assert.equal(deleted.status, 'Success');
    await refused(core.readNamespacedConfigMap({ name, namespace }), 404, 'NotFound');
});

test('create of an existing name: 409 AlreadyExists', async () => {
    const name = uniqueName('typed-dup');
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name } } });
    const status = await refused(
        core.createNamespacedConfigMap({ namespace, body: { metadata: { name } } }),
        409,
        'AlreadyExists',
    );
    assert.equal(status.message, `configmaps "${name}" already exists`);
    assert.deepEqual(status.details, { name, kind: 'configmaps' });
    await core.deleteNamespacedConfigMap({ name, namespace });
});

test('an invalid object: 422 Invalid with its causes', async () => {
    const status = await refused(
        core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'Not_A_Name' } } }),
        422,
        'Invalid',
    );
    assert.equal(status.details.causes[0].field, 'metadata.name');
});

test('list: label and field selectors, limit and continue', async () => {
    const run = uniqueName('typed-list');
    const names = [];
    for (let i = 0; i < 5; i++) {
        const name = `${run}-${i}`;
        names.push(name);
        await core.createNamespacedConfigMap({
            namespace,
            body: { metadata: { name, labels: { run, parity: i % 2 ? 'odd' : 'even' } } },
        });
    }
    const even = await core.listNamespacedConfigMap({ namespace, labelSelector: `run=${run},parity=even` });
    assert.deepEqual(even.items.map((cm) => cm.metadata.name).sort(), [names[0], names[2], names[4]]);
    const one = await core.listNamespacedConfigMap({ namespace, fieldSelector: `metadata.name=${names[3]}` });
    assert.deepEqual(one.items.map((cm) => cm.metadata.name), [names[3]]);
    const all = await core.listConfigMapForAllNamespaces({ labelSelector: `run=${run}` });
    assert.equal(all.items.length, 5);
    const seen = [];
    let _continue;
    let pages = 0;
    do {
        const page = await core.listNamespacedConfigMap({ namespace, labelSelector: `run=${run}`, limit: 2, _continue });
        seen.push(...page.items.map((cm) => cm.metadata.name));
        _continue = page.metadata._continue;
        pages += 1;
        if (_continue) assert.ok(page.metadata.remainingItemCount === undefined || page.metadata.remainingItemCount > 0);
    } while (_continue);
    assert.equal(pages, 3);
    assert.deepEqual(seen.sort(), names);
    await core.deleteCollectionNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
    const left = await core.listNamespacedConfigMap({ namespace, labelSelector: `run=${run}` });
    assert.equal(left.items.length, 0);
});

test('patch: merge, JSON, strategic merge and server-side apply', async () => {
    const name = uniqueName('typed-patch');
    await apps.createNamespacedDeployment({
        namespace,
        body: {
            metadata: { name, labels: { app: name } },
            spec: {
                replicas: 1,
                selector: { matchLabels: { app: name } },
                template: {
                    metadata: { labels: { app: name } },
                    spec: { containers: [{ name: 'main', image: 'busybox', env: [{ name: 'A', value: '1' }] }] },
                },
            },
        },
    });
    const merged = await apps.patchNamespacedDeployment(
        { name, namespace, body: { metadata: { labels: { merged: 'yes' } }, spec: { replicas: 2 } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    assert.equal(merged.spec.replicas, 2);
    assert.equal(merged.metadata.labels.merged, 'yes');
    const jsonPatched = await apps.patchNamespacedDeployment(
        {
            name,
            namespace,
            body: [
                { op: 'test', path: '/spec/replicas', value: 2 },
                { op: 'replace', path: '/spec/replicas', value: 3 },
                { op: 'remove', path: '/metadata/labels/merged' },
            ],
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
    assert.equal(jsonPatched.spec.replicas, 3);
    assert.equal(jsonPatched.metadata.labels.merged, undefined);
    // A failed JSON patch test: kube's 422.
    await refused(
        apps.patchNamespacedDeployment(
            { name, namespace, body: [{ op: 'test', path: '/spec/replicas', value: 9 }] },
            k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
        ),
        422,
        'Invalid',
    );
    // Strategic merge: containers merge by name, env by name.
    const strategic = await apps.patchNamespacedDeployment(
        {
            name,
            namespace,
            body: {
                spec: {
                    template: {
                        spec: {
                            containers: [
                                { name: 'main', env: [{ name: 'B', value: '2' }] },
                                { name: 'side', image: 'busybox' },
                            ],
                        },
                    },
                },
            },
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
    );
    const containers = strategic.spec.template.spec.containers;
    assert.deepEqual(containers.map((c) => c.name), ['main', 'side']);
    assert.deepEqual(containers[0].env.map((e) => e.name).sort(), ['A', 'B']);
    assert.equal(containers[0].image, 'busybox');
    // Server-side apply: a field manager of its own; a conflict without force, taken with it.
    const applied = await apps.patchNamespacedDeployment(
        {
            name,
            namespace,
            fieldManager: 'peer-applier',
            body: {
                apiVersion: 'apps/v1',
                kind: 'Deployment',
                metadata: { name, annotations: { applied: 'yes' } },
            },
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
    );
    assert.equal(applied.metadata.annotations.applied, 'yes');
    assert.ok(applied.metadata.managedFields.some((f) => f.manager === 'peer-applier' && f.operation === 'Apply'));
    const body = {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name },
        spec: { replicas: 5 },
    };
    const status = await refused(
        apps.patchNamespacedDeployment(
            { name, namespace, fieldManager: 'peer-applier', body },
            k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
        ),
        409,
        'Conflict',
    );
    assert.match(status.message, /conflict/);
    const forced = await apps.patchNamespacedDeployment(
        { name, namespace, fieldManager: 'peer-applier', force: true, body },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
    );
    assert.equal(forced.spec.replicas, 5);
    // The scale subresource.
    const scale = await apps.readNamespacedDeploymentScale({ name, namespace });
    assert.equal(scale.spec.replicas, 5);
    scale.spec.replicas = 1;
    const rescaled = await apps.replaceNamespacedDeploymentScale({ name, namespace, body: scale });
    assert.equal(rescaled.spec.replicas, 1);
    await apps.deleteNamespacedDeployment({ name, namespace });
    await refused(apps.readNamespacedDeployment({ name, namespace }), 404, 'NotFound');
});

test('namespace: create, read, status, delete (Terminating, then gone)', async () => {
    const name = uniqueName('typed-ns');
    await core.createNamespace({ body: { metadata: { name } } });
    const ns = await core.readNamespace({ name });
    assert.equal(ns.status.phase, 'Active');
    assert.deepEqual(ns.spec.finalizers, ['kubernetes']);
    await core.deleteNamespace({ name });
});

test('a namespaced read in a missing namespace: 404', async () => {
    await refused(core.readNamespacedConfigMap({ name: 'x', namespace: uniqueName('nowhere') }), 404, 'NotFound');
});

test('a lease: a MicroTime takes six fractional digits; a Date (milliseconds) is refused', async () => {
    const coordination = kc.makeApiClient(k8s.CoordinationV1Api);
    const name = uniqueName('typed-lease');
    // The client writes a Date as toISOString() gives it, three digits: kube-apiserver's
    // MicroTime refuses that (kubernetes-client/javascript#828).
    const renewTime = new Date('2026-12-06T14:10:00.123Z');
    const status = await refused(
        coordination.createNamespacedLease({ namespace, body: { metadata: { name }, spec: { holderIdentity: 'a', renewTime } } }),
        400,
        'BadRequest',
    );
    assert.equal(
        status.message,
        'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-12-06T14:10:00.123Z" as ' +
            '"2006-01-02T15:04:05.000000Z07:00": cannot parse ".123Z" as ".000000"',
    );
    // Six digits, as kube writes MicroTimes, go through the client as they are.
    const created = await coordination.createNamespacedLease({
        namespace,
        body: { metadata: { name }, spec: { holderIdentity: 'a', renewTime: '2026-12-06T14:10:00.123456Z', leaseDurationSeconds: 15 } },
    });
    assert.equal(created.spec.holderIdentity, 'a');
    // Read back as the text kube writes (the client has no model of MicroTime).
    assert.equal(created.spec.renewTime, '2026-12-06T14:10:00.123456Z');
    await coordination.deleteNamespacedLease({ name, namespace });
});

test('an events.k8s.io Event: its eventTime a MicroTime as well', async () => {
    const events = kc.makeApiClient(k8s.EventsV1Api);
    const name = uniqueName('typed-event');
    const event = (eventTime) => ({
        metadata: { name },
        eventTime,
        reportingController: 'peer-suites/client-node',
        reportingInstance: 'peer',
        action: 'Testing',
        reason: 'PeerReason',
        type: 'Normal',
        regarding: { kind: 'Pod', name: 'p', namespace },
        note: 'from client-node',
    });
    const status = await refused(
        events.createNamespacedEvent({ namespace, body: event(new Date('2026-12-06T14:10:00.500Z')) }),
        400,
        'BadRequest',
    );
    assert.match(status.message, /cannot parse "\.500Z" as "\.000000"$/);
    const created = await events.createNamespacedEvent({ namespace, body: event('2026-12-06T14:10:00.500000Z') });
    assert.equal(created.eventTime, '2026-12-06T14:10:00.500000Z');
    assert.equal(created.regarding.name, 'p');
    const listed = await events.listNamespacedEvent({ namespace, fieldSelector: `reason=PeerReason` });
    assert.ok(listed.items.some((e) => e.metadata.name === name));
    await events.deleteNamespacedEvent({ name, namespace });
});
