// Ours: what the test files share. Every test runs against the server named by $KUBECONFIG
// (scripts/peer-suites client-node makes it), each with objects of names of its own.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';

export function config(context) {
    const kc = new k8s.KubeConfig();
    kc.loadFromDefault();
    if (context) kc.setCurrentContext(context);
    return kc;
}

let counter = 0;
export function uniqueName(base) {
    counter += 1;
    return `${base}-${process.pid}-${counter}`;
}

// The ApiException a call is refused with, checked to carry kube's Status.
export async function refused(promise, code, reason) {
    try {
        await promise;
    } catch (err) {
        assert.ok(err instanceof k8s.ApiException, `not an ApiException: ${err}`);
        assert.equal(err.code, code, err.message);
        const status = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
        assert.equal(status.kind, 'Status', JSON.stringify(status));
        assert.equal(status.code, code);
        if (reason !== undefined) assert.equal(status.reason, reason);
        return status;
    }
    assert.fail(`succeeded; expected ${code} ${reason ?? ''}`);
}

// Waits for an event a watch or informer callback resolves: a promise with a way to resolve
// it from outside, ended by a bound that only ends a run that would hang.
export function signal(what, boundMs = 30000) {
    let resolve;
    const promise = new Promise((r, reject) => {
        resolve = r;
        const timer = setTimeout(() => reject(new Error(`never saw ${what}`)), boundMs);
        timer.unref();
    });
    return { promise, resolve };
}

// Retries `check` until it returns a truthy value (a condition the server reaches on its
// own, as a CRD's Established), within a bound that only ends a run that would hang.
export async function eventually(what, check, boundMs = 30000) {
    const end = Date.now() + boundMs;
    for (;;) {
        const value = await check().catch(() => undefined);
        if (value) return value;
        if (Date.now() > end) assert.fail(`never: ${what}`);
        await new Promise((r) => setTimeout(r, 100));
    }
}
