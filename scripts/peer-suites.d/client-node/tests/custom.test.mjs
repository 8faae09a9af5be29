// Ours: custom objects through CustomObjectsApi, of a CRD made through ApiextensionsV1Api:
// established, then its objects created, read, listed, patched (merge, JSON, apply; a
// strategic merge patch refused), replaced, their status subresource, watched, deleted.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { config, eventually, refused, signal, uniqueName } from './helpers.mjs';

const kc = config();
const ext = kc.makeApiClient(k8s.ApiextensionsV1Api);
const custom = kc.makeApiClient(k8s.CustomObjectsApi);
const group = 'peer.watchkeeper.dev';
const version = 'v1';
const plural = 'gadgets';
const namespace = 'default';

before(async () => {
    await ext.createCustomResourceDefinition({
        body: {
            metadata: { name: `${plural}.${group}` },
            spec: {
                group,
                scope: 'Namespaced',
                names: { plural, singular: 'gadget', kind: 'Gadget', listKind: 'GadgetList', shortNames: ['gd'] },
                versions: [
                    {
                        name: version,
                        served: true,
                        storage: true,
                        subresources: { status: {} },
                        additionalPrinterColumns: [{ name: 'Size', type: 'integer', jsonPath: '.spec.size' }],
                        schema: {
                            openAPIV3Schema: {
                                type: 'object',
                                properties: {
                                    spec: {
                                        type: 'object',
                                        properties: {
                                            // `_default`: the client's model name of the schema's `default`.
                                            size: { type: 'integer', minimum: 1, _default: 1 },
                                            color: { type: 'string' },
                                            tags: { type: 'array', items: { type: 'string' } },
                                        },
                                    },
                                    status: { type: 'object', properties: { phase: { type: 'string' } } },
                                },
                            },
                        },
                    },
                ],
            },
        },
    });
    await eventually('the CRD established', async () => {
        const crd = await ext.readCustomResourceDefinition({ name: `${plural}.${group}` });
        return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
    // Served once discovery lists it.
    await eventually('the CRD served', async () => {
        await custom.listNamespacedCustomObject({ group, version, namespace, plural });
        return true;
    });
});

after(async () => {
    await ext.deleteCustomResourceDefinition({ name: `${plural}.${group}` });
});

const gadget = (name, spec) => ({ apiVersion: `${group}/${version}`, kind: 'Gadget', metadata: { name }, spec });

test('custom objects: create (defaults), read, list, replace, delete', async () => {
    const name = uniqueName('gadget');
    const created = await custom.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: gadget(name, { color: 'red' }),
    });
    assert.equal(created.spec.size, 1);
    assert.equal(created.metadata.generation, 1);
    const read = await custom.getNamespacedCustomObject({ group, version, namespace, plural, name });
    assert.equal(read.metadata.uid, created.metadata.uid);
    const list = await custom.listNamespacedCustomObject({ group, version, namespace, plural });
    assert.equal(list.kind, 'GadgetList');
    assert.ok(list.items.some((g) => g.metadata.name === name));
    const all = await custom.listClusterCustomObject({ group, version, plural });
    assert.ok(all.items.some((g) => g.metadata.name === name));
    read.spec.size = 4;
    const replaced = await custom.replaceNamespacedCustomObject({ group, version, namespace, plural, name, body: read });
    assert.equal(replaced.spec.size, 4);
    assert.equal(replaced.metadata.generation, 2);
    // The schema's minimum.
    read.spec.size = 0;
    read.metadata.resourceVersion = replaced.metadata.resourceVersion;
    const status = await refused(
        custom.replaceNamespacedCustomObject({ group, version, namespace, plural, name, body: read }),
        422,
        'Invalid',
    );
    assert.equal(status.details.causes[0].field, 'spec.size');
    await custom.deleteNamespacedCustomObject({ group, version, namespace, plural, name });
    await refused(custom.getNamespacedCustomObject({ group, version, namespace, plural, name }), 404, 'NotFound');
});

test('custom objects: merge, JSON and apply patches; a strategic merge patch is refused', async () => {
    const name = uniqueName('gadget-patch');
    await custom.createNamespacedCustomObject({ group, version, namespace, plural, body: gadget(name, { size: 2, tags: ['a'] }) });
    const merged = await custom.patchNamespacedCustomObject(
        { group, version, namespace, plural, name, body: { spec: { color: 'blue' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    assert.deepEqual(merged.spec, { size: 2, tags: ['a'], color: 'blue' });
    const jsonPatched = await custom.patchNamespacedCustomObject(
        { group, version, namespace, plural, name, body: [{ op: 'add', path: '/spec/tags/-', value: 'b' }] },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.JsonPatch),
    );
    assert.deepEqual(jsonPatched.spec.tags, ['a', 'b']);
    const applied = await custom.patchNamespacedCustomObject(
        {
            group,
            version,
            namespace,
            plural,
            name,
            fieldManager: 'peer-gadget-applier',
            force: true,
            body: gadget(name, { size: 3 }),
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.ServerSideApply),
    );
    assert.equal(applied.spec.size, 3);
    const status = await refused(
        custom.patchNamespacedCustomObject(
            { group, version, namespace, plural, name, body: { spec: { size: 5 } } },
            k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.StrategicMergePatch),
        ),
        415,
        'UnsupportedMediaType',
    );
    assert.match(status.message, /the body of the request was in an unknown format/);
    await custom.deleteNamespacedCustomObject({ group, version, namespace, plural, name });
});

test('custom objects: the status subresource', async () => {
    const name = uniqueName('gadget-status');
    const created = await custom.createNamespacedCustomObject({
        group,
        version,
        namespace,
        plural,
        body: { ...gadget(name, { size: 2 }), status: { phase: 'ignored' } },
    });
    // A create's status is dropped when the status subresource is on.
    assert.equal(created.status, undefined);
    const withStatus = await custom.patchNamespacedCustomObjectStatus(
        { group, version, namespace, plural, name, body: { status: { phase: 'Ready' }, spec: { size: 9 } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    assert.equal(withStatus.status.phase, 'Ready');
    // A /status write keeps the spec.
    assert.equal(withStatus.spec.size, 2);
    assert.equal(withStatus.metadata.generation, 1);
    const read = await custom.getNamespacedCustomObjectStatus({ group, version, namespace, plural, name });
    assert.equal(read.status.phase, 'Ready');
    read.status.phase = 'Done';
    const replaced = await custom.replaceNamespacedCustomObjectStatus({ group, version, namespace, plural, name, body: read });
    assert.equal(replaced.status.phase, 'Done');
    await custom.deleteNamespacedCustomObject({ group, version, namespace, plural, name });
});

test('custom objects: watched with Watch, and through KubernetesObjectApi', async () => {
    const name = uniqueName('gadget-watch');
    const events = [];
    const deleted = signal('DELETED');
    const controller = await new k8s.Watch(kc).watch(
        `/apis/${group}/${version}/namespaces/${namespace}/${plural}`,
        { fieldSelector: `metadata.name=${name}` },
        (type, obj) => {
            events.push(`${type} ${obj.metadata.name} ${obj.spec?.size}`);
            if (type === 'DELETED') deleted.resolve();
        },
        () => {},
    );
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    await objects.create(gadget(name, { size: 5 }));
    const read = await objects.read({ apiVersion: `${group}/${version}`, kind: 'Gadget', metadata: { name, namespace } });
    assert.equal(read.spec.size, 5);
    const list = await objects.list(`${group}/${version}`, 'Gadget', namespace);
    assert.ok(list.items.some((g) => g.metadata.name === name));
    await objects.patch(
        { apiVersion: `${group}/${version}`, kind: 'Gadget', metadata: { name, namespace }, spec: { size: 6 } },
        undefined,
        undefined,
        undefined,
        undefined,
        k8s.PatchStrategy.MergePatch,
    );
    await objects.delete({ apiVersion: `${group}/${version}`, kind: 'Gadget', metadata: { name, namespace } });
    await deleted.promise;
    controller.abort();
    assert.deepEqual(events, [`ADDED ${name} 5`, `MODIFIED ${name} 6`, `DELETED ${name} 6`]);
});
