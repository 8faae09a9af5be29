// Ours: KubeConfig: loaded from the kubeconfig file ($KUBECONFIG), its contexts (a client
// certificate, a bearer token), loaded from options, and the server's answers to a wrong
// token and to no credentials; discovery and version through the typed classes.
import * as k8s from '@kubernetes/client-node';
import { fetch } from 'undici';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { config } from './helpers.mjs';

// The client's typed classes throw a 401 as an ApiException without the body (their
// generated code leaves it out for 401), so the body is read with the request the client
// makes for the same KubeConfig (its RequestContext, its undici dispatcher).
async function unauthorized(kc) {
    await assert.rejects(
        kc.makeApiClient(k8s.CoreV1Api).listNamespace(),
        (err) => err instanceof k8s.ApiException && err.code === 401,
    );
    const context = new k8s.RequestContext(`${kc.getCurrentCluster().server}/api/v1/namespaces`, k8s.HttpMethod.GET);
    await kc.applySecurityAuthentication(context);
    const response = await fetch(context.getUrl(), { headers: context.getHeaders(), dispatcher: context.getDispatcher() });
    assert.equal(response.status, 401);
    assert.equal(response.headers.get('content-type'), 'application/json');
    assert.deepEqual(await response.json(), {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Unauthorized',
        reason: 'Unauthorized',
        code: 401,
    });
}

test('the kubeconfig: current context with a client certificate, the token one', async () => {
    const kc = config();
    assert.equal(kc.getCurrentContext(), 'watchkeeper');
    assert.ok(kc.getCurrentUser().certData);
    assert.ok(kc.getCurrentCluster().server.startsWith('https://127.0.0.1:'));
    const nsCert = await kc.makeApiClient(k8s.CoreV1Api).readNamespace({ name: 'default' });
    assert.equal(nsCert.metadata.name, 'default');
    const token = config('watchkeeper-token');
    assert.equal(token.getCurrentUser().token, 'peer-token-1');
    const nsToken = await token.makeApiClient(k8s.CoreV1Api).readNamespace({ name: 'default' });
    assert.equal(nsToken.metadata.uid, nsCert.metadata.uid);
});

test('who the server says each context is (SelfSubjectReview)', async () => {
    const review = async (kc) =>
        (await kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} })).status.userInfo;
    const cert = await review(config());
    assert.equal(cert.username, 'peer');
    assert.ok(cert.groups.includes('system:masters'));
    const token = await review(config('watchkeeper-token'));
    assert.equal(token.username, 'peer-token-user');
    assert.equal(token.uid, '1001');
});

test('loadFromOptions: a wrong token gets 401 Unauthorized, as a Status', async () => {
    const file = config();
    const cluster = file.getCurrentCluster();
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
        clusters: [{ name: 'c', server: cluster.server, caData: cluster.caData }],
        users: [{ name: 'u', token: 'not-a-token' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
    });
    await unauthorized(kc);
});

test('no credentials, and TLS verification skipped: 401', async () => {
    const cluster = config().getCurrentCluster();
    const kc = new k8s.KubeConfig();
    kc.loadFromClusterAndUser({ name: 'c', server: cluster.server, skipTLSVerify: true }, { name: 'nobody' });
    await unauthorized(kc);
});

test('version and discovery', async () => {
    const kc = config();
    const version = await kc.makeApiClient(k8s.VersionApi).getCode();
    assert.match(version.gitVersion, /^v1\.\d+\.\d+/);
    assert.ok(version.major && version.minor && version.platform);
    const core = await kc.makeApiClient(k8s.CoreApi).getAPIVersions();
    assert.deepEqual(core.versions, ['v1']);
    assert.ok(core.serverAddressByClientCIDRs.length > 0);
    const groups = await kc.makeApiClient(k8s.ApisApi).getAPIVersions();
    const apps = groups.groups.find((g) => g.name === 'apps');
    assert.equal(apps.preferredVersion.groupVersion, 'apps/v1');
    const resources = await kc.makeApiClient(k8s.CoreV1Api).getAPIResources();
    const pods = resources.resources.find((r) => r.name === 'pods');
    assert.equal(pods.kind, 'Pod');
    assert.ok(pods.namespaced);
    assert.ok(pods.verbs.includes('watch'));
    assert.ok(resources.resources.some((r) => r.name === 'pods/status'));
    const appsResources = await kc.makeApiClient(k8s.AppsV1Api).getAPIResources();
    assert.ok(appsResources.resources.some((r) => r.name === 'deployments/scale'));
});

test('Health: readyz, livez, healthz', async () => {
    const health = new k8s.Health(config());
    assert.equal(await health.readyz({}), true);
    assert.equal(await health.livez({}), true);
    assert.equal(await health.healthz({}), true);
});

test('what each context may do: SelfSubjectAccessReview, SelfSubjectRulesReview; a token', async () => {
    const kc = config('watchkeeper-token');
    const authz = kc.makeApiClient(k8s.AuthorizationV1Api);
    const access = await authz.createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: { verb: 'list', resource: 'pods', namespace: 'default' } } },
    });
    assert.equal(access.status.allowed, true);
    const rules = await authz.createSelfSubjectRulesReview({ body: { spec: { namespace: 'default' } } });
    assert.equal(rules.status.incomplete, false);
    assert.ok(rules.status.resourceRules.some((r) => r.verbs.includes('*') && r.resources.includes('*')));
    // A service account's token (the TokenRequest subresource), usable as a bearer token.
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const request = await core.createNamespacedServiceAccountToken({
        name: 'default',
        namespace: 'default',
        body: { spec: { expirationSeconds: 600 } },
    });
    assert.ok(request.status.token);
    assert.ok(request.status.expirationTimestamp instanceof Date);
    const cluster = kc.getCurrentCluster();
    const asAccount = new k8s.KubeConfig();
    asAccount.loadFromOptions({
        clusters: [{ name: 'c', server: cluster.server, caData: cluster.caData }],
        users: [{ name: 'sa', token: request.status.token }],
        contexts: [{ name: 'x', cluster: 'c', user: 'sa' }],
        currentContext: 'x',
    });
    const review = await asAccount.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    assert.equal(review.status.userInfo.username, 'system:serviceaccount:default:default');
});
