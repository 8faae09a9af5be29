"""Schemathesis checks of kube-apiserver's conventions that its OpenAPI documents do not state.

Loaded by `schemathesis_run.py` through `SCHEMATHESIS_HOOKS`. Kube's documents declare only an
operation's success codes (installer.go's `Returns`: 200, 201 for a create, an update or an
apply that created, 202 for an accepted create or a delete that waits) and no error response
at all, so schemathesis's `status_code_conformance` would flag every 4xx that kube-apiserver
itself answers. These two checks take its place:

- `kube_success_codes`: a response below 400 must carry a code the operation declares (what
  generated clients read their answer by: client-python's `_response_types_map`, client-go's
  typed clients).
- `kube_status_errors`: every 4xx or 5xx must be a `Status` as kube-apiserver writes it
  (`responsewriters.ErrorNegotiated`): JSON, `kind: Status`, `apiVersion: v1`, `status:
  Failure`, `code` equal to the HTTP code, a string `message`.
"""

import json

import schemathesis


def _declared(case):
    return {str(code) for code in case.operation.responses.status_codes}


@schemathesis.check
def kube_success_codes(ctx, response, case):
    status = response.status_code
    if status >= 400:
        return None
    declared = _declared(case)
    if "default" in declared or str(status) in declared:
        return None
    raise AssertionError(
        f"Undeclared success code {status}; the operation declares {', '.join(sorted(declared))}"
    )


@schemathesis.check
def kube_status_errors(ctx, response, case):
    status = response.status_code
    if status < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    if content_type.split(";")[0].strip() != "application/json":
        raise AssertionError(f"Error {status} answered as {content_type!r}, not a JSON Status")
    try:
        body = json.loads(response.content)
    except ValueError as error:
        raise AssertionError(f"Error {status} with a body that is not JSON: {error}") from None
    problems = []
    if not isinstance(body, dict):
        problems.append("not an object")
    else:
        for key, want in (("kind", "Status"), ("apiVersion", "v1"), ("status", "Failure"), ("code", status)):
            if body.get(key) != want:
                problems.append(f"{key} is {body.get(key)!r}, not {want!r}")
        if not isinstance(body.get("message"), str):
            problems.append("no message")
    if problems:
        raise AssertionError(f"Error {status} is not kube's Status: {'; '.join(problems)}")
    return None


@schemathesis.hook
def before_call(context, case, kwargs):
    """A list with `watch` in its query gets `timeoutSeconds=1`: a watch is a stream the server
    ends only at its timeout (kube's default: 30 to 60 minutes), and schemathesis reads each
    answer to its end."""
    if case.method.upper() == "GET" and case.query and "watch" in case.query:
        case.query["timeoutSeconds"] = 1
