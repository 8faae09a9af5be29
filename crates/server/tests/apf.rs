//! API Priority and Fairness over real HTTP: the `X-Kubernetes-PF-*-UID` headers, kube's
//! suggested configuration classifying users as kube-apiserver v1.33 does (ordinary users to
//! `global-default`, service accounts to `workload-low`, `kube-system`'s to `workload-high`,
//! nodes to `system` and `node-high`, leader election to `leader-election`) and kept by its
//! ensurer rules, a FlowSchema routing a user to a one-seat `Reject` level (429 while another
//! user is served, and undone live by deleting it), a queuing level serving its queue in
//! order, refusing a full queue and a request past its wait limit, one user's flood not
//! starving another, the `exempt` level past every seat, kubectl listing the objects, a
//! large LIST taking a seat per 100 objects, a busy level borrowing idle levels' seats,
//! kube's flow-control metrics, the health probes classified to `exempt`, a forbidden
//! request classified (the impersonated user's FlowSchema) and queued before its 403, as in
//! kube's handler chain, kube's debug dumps of levels, queues and requests, and a write's
//! fan-out counted by the watches of its namespace.
//!
//! Requests are held open deterministically by a create (or a LIST) whose body is held back:
//! the seats are taken before the body is read. The server shares 6 seats
//! (`--max-requests-inflight 4`, `--max-mutating-requests-inflight 2`): with kube's levels
//! (`exempt` 0 shares, `catch-all` 5, `system` 30, `node-high` 40, `leader-election` 10,
//! `workload-high` 40, `workload-low` 100, `global-default` 20: 245 in all) and a test level
//! of 1 share, every limited level has a nominal ceil(6 × shares / 246) = 1 seat; the test
//! levels neither lend nor borrow unless a test says so, so they keep exactly 1.

use crate::common;
use crate::kubectl_support;

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;
use watchkeeper::limits::apf;
use watchkeeper_testkit::raw::{self, Answer};

use common::{HANG_GUARD, assert_status, configmap, server_with, until};

const TOKENS: &str = "admin-token,admin,1,\"system:masters\"
alice-token,alice,2
bob-token,bob,3
carol-token,carol,4
builder-token,system:serviceaccount:team:builder,5,\"system:serviceaccounts,system:serviceaccounts:team\"
job-token,system:serviceaccount:kube-system:job-controller,6,\"system:serviceaccounts,system:serviceaccounts:kube-system\"
node-token,system:node:n1,7,\"system:nodes\"
scheduler-token,system:kube-scheduler,8
";

const CM: &str = "/api/v1/namespaces/default/configmaps";
const FLOWCONTROL: &str = "/apis/flowcontrol.apiserver.k8s.io/v1";

async fn apf_server(dir: &std::path::Path) -> Server {
    apf_server_with(dir, ServeArgs::default()).await
}

/// [`apf_server`] with `args`' other flags.
async fn apf_server_with(dir: &std::path::Path, args: ServeArgs) -> Server {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    server_with(ServeArgs {
        token_auth_file: Some(tokens),
        max_requests_inflight: Some(4),
        max_mutating_requests_inflight: Some(2),
        ..args
    })
    .await
}

fn head(method: &str, path: &str, token: &str, length: usize) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
    )
}

/// One request as the holder of `token`; its answer (fails the test on a hang).
async fn call(addr: SocketAddr, token: &str, method: &str, path: &str, body: &str) -> Answer {
    tokio::time::timeout(HANG_GUARD, async {
        let mut stream = raw::send(
            addr,
            &head(method, path, token, body.len()),
            body.as_bytes(),
        )
        .await
        .unwrap();
        raw::read_answer(&mut stream).await
    })
    .await
    .expect("an answer")
}

/// A create whose body is held back after its first byte: it holds its seat until
/// [`Held::finish`].
struct Held {
    stream: TcpStream,
    rest: Vec<u8>,
}

async fn hold(addr: SocketAddr, token: &str, name: &str) -> Held {
    hold_at(addr, token, CM, name).await
}

/// [`hold`] of a create at `path`.
async fn hold_at(addr: SocketAddr, token: &str, path: &str, name: &str) -> Held {
    let body = configmap(name, 8).to_string().into_bytes();
    let stream = raw::send(addr, &head("POST", path, token, body.len()), &body[..1])
        .await
        .unwrap();
    Held {
        stream,
        rest: body[1..].to_vec(),
    }
}

impl Held {
    async fn finish(mut self) -> Answer {
        self.stream.write_all(&self.rest).await.unwrap();
        tokio::time::timeout(HANG_GUARD, raw::read_answer(&mut self.stream))
            .await
            .expect("an answer")
    }
}

/// A LIST of `default`'s ConfigMaps carrying a body held back after its first byte: it
/// holds its seats until the rest is sent.
async fn hold_list(addr: SocketAddr, token: &str) -> Held {
    let stream = raw::send(addr, &head("GET", CM, token, 2), b"{")
        .await
        .unwrap();
    Held {
        stream,
        rest: b"}".to_vec(),
    }
}

/// Seats held by (`schema`, `level`) now.
fn executing_seats(server: &Server, schema: &str, level: &str) -> i64 {
    let apf = server.app.limits.apf().expect("APF is on");
    apf.counts()
        .into_iter()
        .find(|((s, l), _)| s == schema && l == level)
        .map_or(0, |(_, counts)| {
            counts
                .executing_seats
                .load(std::sync::atomic::Ordering::Relaxed)
        })
}

/// Executing and waiting requests of (`schema`, `level`) now.
fn counts(server: &Server, schema: &str, level: &str) -> (i64, i64) {
    let apf = server.app.limits.apf().expect("APF is on");
    apf.counts()
        .into_iter()
        .find(|((s, l), _)| s == schema && l == level)
        .map_or((0, 0), |(_, counts)| {
            let (executing, waiting, _) = apf::totals(&counts);
            (executing, waiting)
        })
}

/// Creates `body` at `path` as admin (201).
async fn create(addr: SocketAddr, path: &str, body: &Value) -> Value {
    let answer = call(addr, "admin-token", "POST", path, &body.to_string()).await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.json()
}

/// A priority level of 1 share answering `limit_response` past its seat, neither lending
/// nor borrowing (so it has exactly 1 seat).
/// A watch of `path` opened with `token`: its stream (held open) and its head, which must
/// say 200.
async fn open_watch(addr: SocketAddr, path: &str, token: &str) -> (tokio::net::TcpStream, String) {
    let mut stream = raw::send(addr, &head("GET", path, token, 0), b"")
        .await
        .unwrap();
    let watch_head = tokio::time::timeout(HANG_GUARD, raw::read_head(&mut stream))
        .await
        .expect("a head")
        .unwrap();
    assert_eq!(raw::status_of(&watch_head), 200, "{watch_head}");
    (stream, watch_head)
}

async fn level(addr: SocketAddr, name: &str, limit_response: Value) -> Value {
    borrowing_level(addr, name, 0, limit_response).await
}

/// A priority level of 1 share that may borrow `borrowing_percent` of it.
async fn borrowing_level(
    addr: SocketAddr,
    name: &str,
    borrowing_percent: u32,
    limit_response: Value,
) -> Value {
    create(
        addr,
        &format!("{FLOWCONTROL}/prioritylevelconfigurations"),
        &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "lendablePercent": 0, "borrowingLimitPercent": borrowing_percent,
                "limitResponse": limit_response}}}),
    )
    .await
}

/// A FlowSchema sending every request of `users` to `level`, flows by user.
fn schema_body(name: &str, users: &[&str], level: &str) -> Value {
    let subjects: Vec<Value> = users
        .iter()
        .map(|user| json!({"kind": "User", "user": {"name": user}}))
        .collect();
    json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": subjects,
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}})
}

/// Creates [`schema_body`].
async fn schema(addr: SocketAddr, name: &str, users: &[&str], level: &str) -> Value {
    create(
        addr,
        &format!("{FLOWCONTROL}/flowschemas"),
        &schema_body(name, users, level),
    )
    .await
}

/// The uid of a flow-control object (`flowschemas` or `prioritylevelconfigurations`).
async fn uid(addr: SocketAddr, plural: &str, name: &str) -> String {
    let answer = call(
        addr,
        "admin-token",
        "GET",
        &format!("{FLOWCONTROL}/{plural}/{name}"),
        "",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `answer` names the FlowSchema and priority level of these uids (heads are lowercased).
fn assert_classified(answer: &Answer, schema_uid: &str, level_uid: &str) {
    assert!(
        answer
            .head
            .contains(&format!("x-kubernetes-pf-flowschema-uid: {schema_uid}\r\n")),
        "{}",
        answer.head
    );
    assert!(
        answer.head.contains(&format!(
            "x-kubernetes-pf-prioritylevel-uid: {level_uid}\r\n"
        )),
        "{}",
        answer.head
    );
}

/// An ABAC policy for [`apf_server_with`]: `system:masters` may do anything, alice write in
/// `default`; anyone else nothing.
fn abac_policy(dir: &std::path::Path) -> std::path::PathBuf {
    let policy = dir.join("policy.jsonl");
    let lines: Vec<String> = [
        json!({"group": "system:masters", "namespace": "*", "resource": "*", "apiGroup": "*",
            "nonResourcePath": "*"}),
        json!({"user": "alice", "namespace": "default", "resource": "*", "apiGroup": "*"}),
    ]
    .iter()
    .map(|spec| {
        json!({"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy",
            "spec": spec})
        .to_string()
    })
    .collect();
    std::fs::write(&policy, lines.join("\n")).unwrap();
    policy
}

/// A server with [`abac_policy`], a one-seat level `queued` of one queue, and the FlowSchema
/// `team` sending alice and carol to it.
async fn queued_team_server(dir: &std::path::Path) -> Server {
    let server = apf_server_with(
        dir,
        ServeArgs {
            authorization_policy_file: Some(abac_policy(dir)),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    level(
        addr,
        "queued",
        json!({"type": "Queue",
            "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 3}}),
    )
    .await;
    schema(addr, "team", &["alice", "carol"], "queued").await;
    server
}

/// The resource version of a created object.
fn created_version(answer: &Answer) -> u64 {
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Goal: every classified answer names its FlowSchema and priority level by uid, as
/// kube-apiserver's (client-go reads them): the exempt ones for system:masters,
/// global-default for any other user, on a success and on an error alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_name_their_flow_schema_and_priority_level() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let exempt = (
        uid(addr, "flowschemas", "exempt").await,
        uid(addr, "prioritylevelconfigurations", "exempt").await,
    );
    let global_default = (
        uid(addr, "flowschemas", "global-default").await,
        uid(addr, "prioritylevelconfigurations", "global-default").await,
    );
    assert_ne!(exempt.0, global_default.0);
    let answer = call(addr, "admin-token", "GET", CM, "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_classified(&answer, &exempt.0, &exempt.1);
    let answer = call(addr, "alice-token", "GET", CM, "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_classified(&answer, &global_default.0, &global_default.1);
    let answer = call(addr, "bob-token", "GET", &format!("{CM}/missing"), "").await;
    assert_status(&answer, 404, "NotFound");
    assert_classified(&answer, &global_default.0, &global_default.1);
    // A watch is classified too (its head carries the headers).
    let (_stream, watch_head) = open_watch(addr, &format!("{CM}?watch=true"), "bob-token").await;
    let watch_head = watch_head.to_ascii_lowercase();
    assert!(
        watch_head.contains(&format!(
            "x-kubernetes-pf-flowschema-uid: {}\r\n",
            global_default.0
        )),
        "{watch_head}"
    );
    server.shutdown().await;
}

/// Goal: a FlowSchema routing alice to a one-seat `Reject` level makes her second concurrent
/// request kube's 429 (named by her schema and level) while bob is served; deleting the
/// schema sends her next request to global-default at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reject_level_refuses_past_its_seat_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let level_uid = level(addr, "one-seat", json!({"type": "Reject"})).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let schema_uid = schema(addr, "alice", &["alice"], "one-seat").await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let apf = server.app.limits.apf().unwrap();
    assert_eq!(apf.seats("one-seat"), Some(1));
    assert_eq!(apf.seats("global-default"), Some(1));
    let held = hold(addr, "alice-token", "held").await;
    until(|| counts(&server, "alice", "one-seat").0 == 1).await;
    let refused = call(addr, "alice-token", "GET", CM, "").await;
    assert_status(&refused, 429, "TooManyRequests");
    assert_eq!(
        refused.json()["message"],
        "Too many requests, please try again later."
    );
    assert!(
        refused.head.contains("retry-after: 1\r\n"),
        "{}",
        refused.head
    );
    assert_classified(&refused, &schema_uid, &level_uid);
    let served = call(addr, "bob-token", "GET", CM, "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    assert_eq!(
        common::sample(
            &metrics.body,
            "apiserver_flowcontrol_rejected_requests_total{flow_schema=\"alice\",priority_level=\"one-seat\",reason=\"concurrency-limit\"}"
        ),
        1
    );
    assert_eq!(
        common::sample(
            &metrics.body,
            "apiserver_flowcontrol_current_executing_requests{flow_schema=\"alice\",priority_level=\"one-seat\"}"
        ),
        1
    );
    // Live: without the schema, alice is global-default's, whose seat is free.
    let deleted = call(
        addr,
        "admin-token",
        "DELETE",
        &format!("{FLOWCONTROL}/flowschemas/alice"),
        "",
    )
    .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let served = call(addr, "alice-token", "GET", CM, "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    assert_classified(
        &served,
        &uid(addr, "flowschemas", "global-default").await,
        &uid(addr, "prioritylevelconfigurations", "global-default").await,
    );
    assert_eq!(held.finish().await.status, 201);
    until(|| counts(&server, "alice", "one-seat").0 == 0).await;
    server.shutdown().await;
}

/// Goal: a queuing level serves its waiting requests in their order when its seat frees;
/// a request past its wait limit (a quarter of its `?timeout=`) and one finding its queue
/// full get kube's 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_requests_are_served_in_order_when_the_seat_frees() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    level(
        addr,
        "queued",
        json!({"type": "Queue",
            "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 3}}),
    )
    .await;
    schema(addr, "alice", &["alice"], "queued").await;
    let held = hold(addr, "alice-token", "first").await;
    until(|| counts(&server, "alice", "queued").0 == 1).await;
    // Waits at most 250 ms of its 1 s, then is refused.
    let late = call(addr, "alice-token", "GET", &format!("{CM}?timeout=1s"), "").await;
    assert_status(&late, 429, "TooManyRequests");
    let mut waiting = Vec::new();
    for name in ["a", "b", "c"] {
        let body = configmap(name, 8).to_string();
        waiting.push(tokio::spawn(async move {
            call(addr, "alice-token", "POST", CM, &body).await
        }));
        let queued = waiting.len() as i64;
        until(|| counts(&server, "alice", "queued").1 == queued).await;
    }
    let full = call(addr, "alice-token", "GET", CM, "").await;
    assert_status(&full, 429, "TooManyRequests");
    let first = created_version(&held.finish().await);
    let mut versions = vec![first];
    for task in waiting {
        versions.push(created_version(&task.await.unwrap()));
    }
    let mut sorted = versions.clone();
    sorted.sort_unstable();
    assert_eq!(versions, sorted, "served out of order");
    let apf = server.app.limits.apf().unwrap();
    let rejected = |reason: apf::Reason| {
        apf.counts()
            .into_iter()
            .find(|((s, _), _)| s == "alice")
            .map(|(_, c)| c.rejected[reason as usize].load(std::sync::atomic::Ordering::Relaxed))
    };
    assert_eq!(rejected(apf::Reason::TimeOut), Some(1));
    assert_eq!(rejected(apf::Reason::QueueFull), Some(1));
    server.shutdown().await;
}

/// Goal: one user's flood does not drown out another at the same level (kube's e2e "requests
/// can't be drowned out (fairness)" in miniature): with the seat taken, alice queues 45
/// creates at once, then bob one; once the seat frees, bob's is served while most of
/// alice's still wait. First come, first served would serve all 45 first; kube's fair
/// queuing orders by virtual finish time, where alice's queued requests are each charged
/// after the one before and credited only for the virtual time since they arrived (the
/// exact order, which depends on how long the burst took, is tested without a clock in
/// `queues`' unit tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_by_one_user_does_not_starve_another() {
    const FLOOD: usize = 45;
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    level(
        addr,
        "shared",
        json!({"type": "Queue",
            "queuing": {"queues": 16, "handSize": 1, "queueLengthLimit": 50}}),
    )
    .await;
    schema(addr, "users", &["alice", "bob", "carol"], "shared").await;
    // The premise: alice's and bob's flows have different queues.
    let queue_of = |user: &str| {
        let mut queue = 0;
        apf::queues::deal(apf::flow_hash("users", user), 16, 1, |q| queue = q);
        queue
    };
    assert_ne!(queue_of("alice"), queue_of("bob"));
    let held = hold(addr, "carol-token", "held").await;
    until(|| counts(&server, "users", "shared").0 == 1).await;
    let alice: Vec<_> = (0..FLOOD)
        .map(|index| {
            let body = configmap(&format!("alice-{index}"), 8).to_string();
            tokio::spawn(async move { call(addr, "alice-token", "POST", CM, &body).await })
        })
        .collect();
    until(|| counts(&server, "users", "shared").1 == FLOOD as i64).await;
    let bob = {
        let body = configmap("bob", 8).to_string();
        tokio::spawn(async move { call(addr, "bob-token", "POST", CM, &body).await })
    };
    until(|| counts(&server, "users", "shared").1 == FLOOD as i64 + 1).await;
    assert_eq!(held.finish().await.status, 201);
    let bob = created_version(&bob.await.unwrap());
    let mut before_bob = 0;
    for task in alice {
        if created_version(&task.await.unwrap()) < bob {
            before_bob += 1;
        }
    }
    assert!(
        before_bob < FLOOD * 3 / 4,
        "{before_bob} of alice's {FLOOD} were served before bob's"
    );
    server.shutdown().await;
}

/// Goal: `exempt` (system:masters) is never limited: with more of its requests held than the
/// server has seats, another is served, and global-default's seat is still free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_users_are_never_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let mut held = Vec::new();
    for index in 0..7 {
        held.push(hold(addr, "admin-token", &format!("held-{index}")).await);
    }
    until(|| counts(&server, "exempt", "exempt").0 == 7).await;
    let served = call(addr, "admin-token", "GET", CM, "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    let served = call(addr, "alice-token", "GET", CM, "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    for request in held {
        assert_eq!(request.finish().await.status, 201);
    }
    server.shutdown().await;
}

/// Goal: kubectl lists the flow-control objects APF reads: kube-apiserver v1.33's mandatory
/// and suggested ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_flow_schemas_and_priority_levels() {
    let server = common::server().await;
    let k = kubectl_support::Kubectl::new(server.addr);
    let names = kubectl_support::names(&k.ok(&["get", "flowschemas"]).await);
    assert_eq!(
        names,
        [
            "catch-all",
            "endpoint-controller",
            "exempt",
            "global-default",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "probes",
            "service-accounts",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "workload-leader-election",
        ]
    );
    let levels = k.ok(&["get", "prioritylevelconfigurations"]).await;
    let rows: Vec<Vec<&str>> = levels
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().take(6).collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["catch-all", "Limited", "5", "<none>", "<none>", "<none>"],
            ["exempt", "Exempt", "<none>", "<none>", "<none>", "<none>"],
            ["global-default", "Limited", "20", "128", "6", "50"],
            ["leader-election", "Limited", "10", "16", "4", "50"],
            ["node-high", "Limited", "40", "64", "6", "50"],
            ["system", "Limited", "30", "64", "6", "50"],
            ["workload-high", "Limited", "40", "128", "6", "50"],
            ["workload-low", "Limited", "100", "128", "6", "50"],
        ],
        "{levels}"
    );
    server.shutdown().await;
}

/// What `pick` finds in the admin's GET of `path` (its status and body), once it finds
/// something.
async fn once<T>(addr: SocketAddr, path: &str, pick: impl Fn(u16, &Value) -> Option<T>) -> T {
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let answer = call(addr, "admin-token", "GET", path, "").await;
            if let Some(found) = pick(answer.status, &answer.json()) {
                return found;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the object's state")
}

/// The `Dangling` condition of the FlowSchema `name` once its status is `status`.
async fn dangling_once(addr: SocketAddr, name: &str, status: &str) -> Value {
    once(
        addr,
        &format!("{FLOWCONTROL}/flowschemas/{name}"),
        |_, body| {
            body["status"]["conditions"]
                .as_array()
                .and_then(|all| all.iter().find(|c| c["type"] == "Dangling"))
                .filter(|c| c["status"] == status)
                .cloned()
        },
    )
    .await
}

/// Goal: kube's suggested configuration classifies as on kube-apiserver v1.33: an ordinary
/// user to `global-default`, a service account to `workload-low`, `kube-system`'s to
/// `workload-high` and, for a lease, to `leader-election`, a node to `node-high` for its
/// Node and to `system` otherwise, the scheduler to `workload-high`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suggested_configuration_classifies_as_kube() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let lease =
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager";
    for (token, path, schema, level) in [
        ("alice", CM, "global-default", "global-default"),
        ("builder", CM, "service-accounts", "workload-low"),
        ("job", CM, "kube-system-service-accounts", "workload-high"),
        ("job", lease, "system-leader-election", "leader-election"),
        ("node", "/api/v1/nodes/n1", "system-node-high", "node-high"),
        ("node", "/api/v1/pods", "system-nodes", "system"),
        ("scheduler", CM, "kube-scheduler", "workload-high"),
    ] {
        let answer = call(addr, &format!("{token}-token"), "GET", path, "").await;
        assert!(
            matches!(answer.status, 200 | 404),
            "{token} {path}: {}",
            answer.body
        );
        assert_classified(
            &answer,
            &uid(addr, "flowschemas", schema).await,
            &uid(addr, "prioritylevelconfigurations", level).await,
        );
    }
    server.shutdown().await;
}

/// Goal: the configuration is kept by kube's ensurer rules while serving: a suggested level
/// edited while annotated `autoupdate-spec: "true"` gets its spec back, one annotated
/// `"false"` keeps the edit, a mandatory object's annotation is put back to `"true"`, a
/// deleted suggested schema comes back, and a FlowSchema outside the configuration is deleted
/// when annotated `"true"`, kept otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configuration_is_kept_by_kubes_ensurer_rules() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let levels = format!("{FLOWCONTROL}/prioritylevelconfigurations");
    let shares = |body: &Value| body["spec"]["limited"]["nominalConcurrencyShares"].clone();
    let patch = |path: String, body: Value| async move {
        let headers = [
            ("Authorization", "Bearer admin-token"),
            ("Content-Type", "application/merge-patch+json"),
        ];
        let (status, text) =
            common::request_with_headers(addr, "PATCH", &path, &headers, &body.to_string()).await;
        assert_eq!(status, 200, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    // Auto-updated: the edit is undone.
    let edited = patch(
        format!("{levels}/workload-low"),
        json!({"spec": {"limited": {"nominalConcurrencyShares": 7}}}),
    )
    .await;
    assert_eq!(shares(&edited), 7);
    let restored = once(addr, &format!("{levels}/workload-low"), |_, body| {
        (shares(body) == 100).then(|| body.clone())
    })
    .await;
    assert_eq!(
        restored["metadata"]["generation"],
        edited["metadata"]["generation"].as_i64().unwrap() + 1
    );
    // The mandatory ones' annotation comes back.
    patch(
        format!("{levels}/catch-all"),
        json!({"metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}}}),
    )
    .await;
    once(addr, &format!("{levels}/catch-all"), |_, body| {
        (body["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] == "true")
            .then_some(())
    })
    .await;
    // Not auto-updated: the edit stays.
    patch(
        format!("{levels}/global-default"),
        json!({"metadata": {"annotations": {"apf.kubernetes.io/autoupdate-spec": "false"}},
            "spec": {"limited": {"nominalConcurrencyShares": 7}}}),
    )
    .await;
    // Objects outside the configuration: one auto-updated, one not.
    for (name, annotations) in [
        ("mine", json!({"apf.kubernetes.io/autoupdate-spec": "true"})),
        ("yours", json!({})),
    ] {
        let mut body = schema_body(name, &["alice"], "workload-low");
        body["metadata"]["annotations"] = annotations;
        create(addr, &format!("{FLOWCONTROL}/flowschemas"), &body).await;
    }
    // A deleted suggested schema comes back; the keeper's pass that creates it revises and
    // removes too.
    let probes = format!("{FLOWCONTROL}/flowschemas/probes");
    let before = uid(addr, "flowschemas", "probes").await;
    let deleted = call(addr, "admin-token", "DELETE", &probes, "").await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    once(addr, &probes, |status, body| {
        (status == 200 && body["metadata"]["uid"] != before.as_str()).then_some(())
    })
    .await;
    once(
        addr,
        &format!("{FLOWCONTROL}/flowschemas/mine"),
        |status, _| (status == 404).then_some(()),
    )
    .await;
    uid(addr, "flowschemas", "yours").await;
    let kept = call(
        addr,
        "admin-token",
        "GET",
        &format!("{levels}/global-default"),
        "",
    )
    .await;
    assert_eq!(shares(&kept.json()), 7);
    server.shutdown().await;
}

/// Goal: FlowSchemas get kube's `Dangling` condition: `False` for the mandatory ones, `True`
/// for one naming a missing level (which classifies nothing: alice stays global-default's),
/// and `False` once that level is created (alice is then its).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_schema_naming_a_missing_level_is_dangling() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let exempt = dangling_once(addr, "exempt", "False").await;
    assert_eq!(exempt["reason"], "Found");
    assert_eq!(
        exempt["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"exempt\" and it exists"
    );
    schema(addr, "alice", &["alice"], "later").await;
    let condition = dangling_once(addr, "alice", "True").await;
    assert_eq!(condition["reason"], "NotFound");
    assert_eq!(
        condition["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"later\" but there is no such object"
    );
    let global_default = uid(addr, "prioritylevelconfigurations", "global-default").await;
    let answer = call(addr, "alice-token", "GET", CM, "").await;
    assert!(
        answer.head.contains(&format!(
            "x-kubernetes-pf-prioritylevel-uid: {global_default}\r\n"
        )),
        "{}",
        answer.head
    );
    let later = level(addr, "later", json!({"type": "Reject"})).await;
    let condition = dangling_once(addr, "alice", "False").await;
    assert_eq!(condition["reason"], "Found");
    let answer = call(addr, "alice-token", "GET", CM, "").await;
    assert!(
        answer.head.contains(&format!(
            "x-kubernetes-pf-prioritylevel-uid: {}\r\n",
            later["metadata"]["uid"].as_str().unwrap()
        )),
        "{}",
        answer.head
    );
    server.shutdown().await;
}

/// Goal: `--enable-priority-and-fairness=false` is kube's max-in-flight filter: no request is
/// classified (no headers); on, the two in-flight limits must add up to a positive number of
/// seats (kube's start-up error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_can_be_turned_off() {
    let server = server_with(ServeArgs {
        enable_priority_and_fairness: Some(false),
        ..ServeArgs::default()
    })
    .await;
    assert!(server.app.limits.apf().is_none());
    let (status, _) = common::get_json(server.addr, CM).await;
    assert_eq!(status, 200);
    // kube installs the debug dumps only with the feature on.
    let (status, _) = common::get_json(
        server.addr,
        "/debug/api_priority_and_fairness/dump_priority_levels",
    )
    .await;
    assert_eq!(status, 404);
    let answer = tokio::time::timeout(HANG_GUARD, async {
        let mut stream = raw::send(
            server.addr,
            &format!("GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
            b"",
        )
        .await
        .unwrap();
        raw::read_answer(&mut stream).await
    })
    .await
    .expect("an answer");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(!answer.head.contains("x-kubernetes-pf-"), "{}", answer.head);
    server.shutdown().await;
    let unlimited = |apf: Option<bool>| ServeArgs {
        max_requests_inflight: Some(0),
        max_mutating_requests_inflight: Some(0),
        enable_priority_and_fairness: apf,
        ..ServeArgs::default()
    };
    let refused = watchkeeper::config::ServeConfig::from_args(unlimited(None)).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid configuration: MaxRequestsInFlight=0 and MaxMutatingRequestsInFlight=0; they must add up to something positive"
    );
    assert!(watchkeeper::config::ServeConfig::from_args(unlimited(Some(false))).is_ok());
}

/// Goal: a LIST takes seats by the objects it may return, as kube's work estimator gives
/// them (one per 100, up to 10): with 150 ConfigMaps stored, alice's held LIST holds 2 seats
/// of her one-seat `Reject` level (it runs alone, being wider than the level), seen in
/// `apiserver_flowcontrol_current_executing_seats`, and her next request is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_list_takes_a_seat_per_hundred_objects() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    level(addr, "one-seat", json!({"type": "Reject"})).await;
    schema(addr, "alice", &["alice"], "one-seat").await;
    for index in 0..150 {
        create(addr, CM, &configmap(&format!("cm-{index}"), 8)).await;
    }
    let held = hold_list(addr, "alice-token").await;
    until(|| counts(&server, "alice", "one-seat").0 == 1).await;
    assert_eq!(executing_seats(&server, "alice", "one-seat"), 2);
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    assert_eq!(
        common::sample(
            &metrics.body,
            "apiserver_flowcontrol_current_executing_seats{flow_schema=\"alice\",priority_level=\"one-seat\"}"
        ),
        2
    );
    let refused = call(addr, "alice-token", "GET", &format!("{CM}/cm-1"), "").await;
    assert_status(&refused, 429, "TooManyRequests");
    // Both estimates counted in kube's histogram: 2 seats, then 1.
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    let pair = "flow_schema=\"alice\",priority_level=\"one-seat\"";
    for (bucket, count) in [("1", 1), ("2", 2)] {
        assert_eq!(
            common::sample(
                &metrics.body,
                &format!(
                    "apiserver_flowcontrol_work_estimated_seats_bucket{{{pair},le=\"{bucket}\"}}"
                )
            ),
            count,
            "le {bucket}"
        );
    }
    let listed = held.finish().await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    until(|| executing_seats(&server, "alice", "one-seat") == 0).await;
    // A GET of one object takes one seat.
    let got = call(addr, "alice-token", "GET", &format!("{CM}/cm-1"), "").await;
    assert_eq!(got.status, 200, "{}", got.body);
    server.shutdown().await;
}

/// Goal: borrowing (KEP-1040): a level of 1 nominal seat that may borrow 300 % of it, with
/// four requests of alice held (one running, three queued), gets seats the idle levels
/// lend at the next adjustments (every 100 ms here: `--apf-borrowing-period-ms`) until all
/// four run; `apiserver_flowcontrol_current_limit_seats` shows its limit of 4 (its upper
/// limit) against a nominal 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_level_borrows_the_seats_idle_levels_lend() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server_with(
        dir.path(),
        ServeArgs {
            apf_borrowing_period_ms: Some(100),
            ..ServeArgs::default()
        },
    )
    .await;
    let addr = server.addr;
    borrowing_level(
        addr,
        "borrower",
        300,
        json!({"type": "Queue",
            "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 10}}),
    )
    .await;
    schema(addr, "alice", &["alice"], "borrower").await;
    let mut held = Vec::new();
    for index in 0..4 {
        held.push(hold(addr, "alice-token", &format!("held-{index}")).await);
        until(|| {
            let (executing, waiting) = counts(&server, "alice", "borrower");
            executing + waiting == index + 1
        })
        .await;
    }
    until(|| counts(&server, "alice", "borrower") == (4, 0)).await;
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    for (name, value) in [
        ("nominal_limit_seats", 1),
        ("lower_limit_seats", 1),
        ("upper_limit_seats", 4),
        ("current_limit_seats", 4),
    ] {
        assert_eq!(
            common::sample(
                &metrics.body,
                &format!("apiserver_flowcontrol_{name}{{priority_level=\"borrower\"}}")
            ),
            value,
            "{name}"
        );
    }
    for request in held {
        assert_eq!(request.finish().await.status, 201);
    }
    server.shutdown().await;
}

/// Goal: the flow-control metrics kube's e2e and operators read are exported with kube's
/// names and labels: per priority level its nominal, lower, upper and current limits, per
/// (FlowSchema, level) the dispatched requests and the wait histogram (`execute` label).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flowcontrol_metrics_carry_kubes_names_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let answer = call(addr, "alice-token", "GET", CM, "").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    let text = &metrics.body;
    let pair = "flow_schema=\"global-default\",priority_level=\"global-default\"";
    assert!(
        common::sample(
            text,
            &format!("apiserver_flowcontrol_dispatched_requests_total{{{pair}}}")
        ) >= 1
    );
    assert!(
        common::sample(
            text,
            &format!(
                "apiserver_flowcontrol_request_wait_duration_seconds_count{{{pair},execute=\"true\"}}"
            )
        ) >= 1
    );
    assert!(text.contains(&format!(
        "apiserver_flowcontrol_request_wait_duration_seconds_bucket{{{pair},execute=\"true\",le=\"0.005\"}}"
    )));
    // global-default: 6 × 20 / 245 → 1 nominal seat, lends 50 % (rounded: 1), may borrow
    // the server's 6.
    for (name, value) in [
        ("nominal_limit_seats", 1),
        ("lower_limit_seats", 0),
        ("upper_limit_seats", 7),
    ] {
        assert_eq!(
            common::sample(
                text,
                &format!("apiserver_flowcontrol_{name}{{priority_level=\"global-default\"}}")
            ),
            value,
            "{name}"
        );
    }
    for name in [
        "apiserver_flowcontrol_current_limit_seats{priority_level=\"exempt\"}",
        "apiserver_flowcontrol_current_inqueue_seats{flow_schema=\"global-default\",priority_level=\"global-default\"}",
        "apiserver_flowcontrol_current_executing_seats{flow_schema=\"global-default\",priority_level=\"global-default\"}",
        "apiserver_flowcontrol_demand_seats_high_watermark{priority_level=\"global-default\"}",
        "apiserver_flowcontrol_seat_fair_frac",
    ] {
        assert!(text.contains(&format!("\n{name} ")), "no {name} in\n{text}");
    }
    server.shutdown().await;
}

/// Goal: as in kube-apiserver, the health probes pass API Priority and Fairness: the
/// suggested `probes` FlowSchema sends them to `exempt`, and their answers say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_probes_are_classified_as_exempt_by_the_probes_flow_schema() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    let probes = uid(addr, "flowschemas", "probes").await;
    let exempt = uid(addr, "prioritylevelconfigurations", "exempt").await;
    for path in ["/healthz", "/livez", "/readyz"] {
        let answer = call(addr, "alice-token", "GET", path, "").await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        assert_classified(&answer, &probes, &exempt);
    }
    server.shutdown().await;
}

/// Goal: a watch takes a seat while it starts, as kube seats a watch's initialization: on
/// alice's one-seat `Reject` level her watch is refused while a create of hers holds the
/// seat; once the seat is free her watch starts and gives the seat back while it streams
/// (her next request is served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_takes_a_seat_while_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    level(addr, "one-seat", json!({"type": "Reject"})).await;
    schema(addr, "alice", &["alice"], "one-seat").await;
    let watch = format!("{CM}?watch=true");
    let held = hold(addr, "alice-token", "held").await;
    until(|| counts(&server, "alice", "one-seat").0 == 1).await;
    let refused = call(addr, "alice-token", "GET", &watch, "").await;
    assert_status(&refused, 429, "TooManyRequests");
    assert_eq!(held.finish().await.status, 201);
    until(|| counts(&server, "alice", "one-seat").0 == 0).await;
    let (stream, _) = open_watch(addr, &watch, "alice-token").await;
    until(|| counts(&server, "alice", "one-seat").0 == 0).await;
    let served = call(addr, "alice-token", "GET", CM, "").await;
    assert_eq!(served.status, 200, "{}", served.body);
    drop(stream);
    server.shutdown().await;
}

/// Goal: priority and fairness comes before authorization, as in kube-apiserver's handler
/// chain: carol's forbidden LIST waits in her flow's queue behind alice's held create, is
/// then refused 403 naming its FlowSchema and priority level, and is counted as dispatched
/// under them; the admin impersonating dave (the admin alone would be `exempt`) is
/// classified by dave's FlowSchema, and dave's 403 names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_request_is_classified_and_waits_its_turn() {
    let dir = tempfile::tempdir().unwrap();
    let server = queued_team_server(dir.path()).await;
    let addr = server.addr;
    schema(addr, "dave", &["dave"], "global-default").await;
    let team = uid(addr, "flowschemas", "team").await;
    let queued = uid(addr, "prioritylevelconfigurations", "queued").await;
    let held = hold(addr, "alice-token", "first").await;
    until(|| counts(&server, "team", "queued").0 == 1).await;
    let forbidden = tokio::spawn(async move { call(addr, "carol-token", "GET", CM, "").await });
    until(|| counts(&server, "team", "queued").1 == 1).await;
    assert_eq!(held.finish().await.status, 201);
    let refused = forbidden.await.unwrap();
    assert_status(&refused, 403, "Forbidden");
    assert_classified(&refused, &team, &queued);
    let metrics = call(addr, "admin-token", "GET", "/metrics", "").await;
    assert_eq!(
        common::sample(
            &metrics.body,
            "apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"team\",priority_level=\"queued\"}"
        ),
        2,
        "{}",
        metrics.body
    );
    let dave = (
        uid(addr, "flowschemas", "dave").await,
        uid(addr, "prioritylevelconfigurations", "global-default").await,
    );
    let impersonated = format!(
        "GET {CM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer admin-token\r\nImpersonate-User: dave\r\nConnection: close\r\n\r\n"
    );
    let answer = tokio::time::timeout(HANG_GUARD, async {
        let mut stream = raw::send(addr, &impersonated, b"").await.unwrap();
        raw::read_answer(&mut stream).await
    })
    .await
    .expect("an answer");
    assert_status(&answer, 403, "Forbidden");
    assert!(answer.body.contains("User \\\"dave\\\""), "{}", answer.body);
    assert_classified(&answer, &dave.0, &dave.1);
    server.shutdown().await;
}

/// The rows of a debug dump's text: each line's cells, split on `,` and trimmed.
fn cells(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| line.split(',').map(|cell| cell.trim().to_owned()).collect())
        .collect()
}

/// Asserts that every cell of `text` but a line's last starts at the same column on every
/// line (Go's tabwriter aligns them so).
fn assert_aligned(text: &str) {
    let starts = |line: &str| -> Vec<usize> {
        let mut starts = Vec::new();
        let mut after_comma = false;
        for (at, c) in line.chars().enumerate() {
            if after_comma && c != ' ' {
                starts.push(at);
                after_comma = false;
            }
            after_comma |= c == ',';
        }
        starts
    };
    let mut lines = text.lines();
    let first = starts(lines.next().unwrap());
    for line in lines {
        let these = starts(line);
        // A last cell that is empty has no start.
        assert_eq!(these[..], first[..these.len()], "{text}");
    }
}

/// `GET /debug/api_priority_and_fairness/{dump}` as the holder of `token`.
async fn dump(addr: SocketAddr, token: &str, dump: &str) -> Answer {
    call(
        addr,
        token,
        "GET",
        &format!("/debug/api_priority_and_fairness/{dump}"),
        "",
    )
    .await
}

/// Goal: kube-apiserver's three API Priority and Fairness dumps, its header lines and rows,
/// over a level where alice's create holds the seat and her LIST waits in the queue: the
/// level's counts, its queue's, and each request (waiting, executing in its queue, and the
/// admin's own exempt one without a queue), with the request details when asked; carol, who
/// may not get the paths, is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debug_dumps_print_levels_queues_and_requests_as_kube() {
    let dir = tempfile::tempdir().unwrap();
    let server = queued_team_server(dir.path()).await;
    let addr = server.addr;
    let held = hold(addr, "alice-token", "first").await;
    until(|| counts(&server, "team", "queued").0 == 1).await;
    let waiting = tokio::spawn(async move { call(addr, "alice-token", "GET", CM, "").await });
    until(|| counts(&server, "team", "queued").1 == 1).await;

    let levels = dump(addr, "admin-token", "dump_priority_levels").await;
    assert_eq!(levels.status, 200, "{}", levels.body);
    assert!(
        levels
            .head
            .contains("content-type: text/plain; charset=utf-8\r\n"),
        "{}",
        levels.head
    );
    let lines: Vec<&str> = levels.body.lines().collect();
    assert_eq!(
        lines[0],
        "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests"
    );
    // The first column is as wide as its widest cell plus a space (Go's tabwriter).
    let row = lines
        .iter()
        .find(|line| line.starts_with("queued,"))
        .expect("a row for the level");
    assert!(row.starts_with("queued,            1,"), "{row}");
    assert_aligned(&levels.body);
    let rows = cells(&levels.body);
    let names: Vec<&str> = rows[1..].iter().map(|r| r[0].as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(names.contains(&"global-default") && names.contains(&"exempt"));
    let queued = rows.iter().find(|r| r[0] == "queued").unwrap();
    assert_eq!(
        queued[1..],
        ["1", "false", "false", "1", "1", "1", "0", "0", "0"]
    );

    let queues = dump(addr, "admin-token", "dump_queues").await;
    assert_eq!(queues.status, 200, "{}", queues.body);
    assert_eq!(
        queues.body.lines().next().unwrap(),
        "PriorityLevelName, Index,  PendingRequests, ExecutingRequests, SeatsInUse, NextDispatchR, InitialSeatsSum, MaxSeatsSum, TotalWorkSum"
    );
    assert_aligned(&queues.body);
    let rows = cells(&queues.body);
    let ours: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "queued").collect();
    assert_eq!(ours.len(), 1, "one queue");
    assert_eq!(ours[0][1..5], ["0", "1", "1", "1"]);
    assert!(ours[0][5].ends_with("ss"), "{:?}", ours[0]);
    assert_eq!(ours[0][6..], ["1", "1", "0.00300000ss"]);
    // kube's global-default queues: 128.
    assert_eq!(
        rows.iter().filter(|r| r[0] == "global-default").count(),
        128
    );

    let requests = dump(addr, "admin-token", "dump_requests").await;
    assert_eq!(requests.status, 200, "{}", requests.body);
    // ArriveTime is as wide as the longest time printed (Go drops a fraction's trailing
    // zeros), the columns before it as their headers.
    let header = requests.body.lines().next().unwrap();
    assert!(
        header.starts_with(
            "PriorityLevelName, FlowSchemaName, QueueIndex, RequestIndexInQueue, FlowDistingsher, ArriveTime,"
        ),
        "{header}"
    );
    let rows = cells(&requests.body);
    assert_eq!(
        rows[0],
        [
            "PriorityLevelName",
            "FlowSchemaName",
            "QueueIndex",
            "RequestIndexInQueue",
            "FlowDistingsher",
            "ArriveTime",
            "InitialSeats",
            "FinalSeats",
            "AdditionalLatency",
            "StartTime"
        ]
    );
    assert_aligned(&requests.body);
    let ours: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "queued").collect();
    assert_eq!(ours.len(), 2, "{}", requests.body);
    // The waiting LIST first (queue 0, place 0, not started), then the executing create.
    assert_eq!(ours[0][1..5], ["team", "0", "0", "alice"]);
    assert_eq!(ours[0][6..], ["1", "0", "0s", "0001-01-01T00:00:00Z"]);
    assert_eq!(ours[1][1..5], ["team", "0", "-1", "alice"]);
    for row in &ours {
        assert!(row[5].ends_with('Z') && row[5].len() > 20, "{row:?}");
    }
    assert_ne!(ours[1][9], "0001-01-01T00:00:00Z");
    // The dump's own request: exempt, granted without a queue.
    assert!(
        rows.iter()
            .any(|r| r[0] == "exempt" && r[1] == "exempt" && r[2] == "-1" && r[3] == "-1"),
        "{}",
        requests.body
    );

    let detailed = dump(addr, "admin-token", "dump_requests?includeRequestDetails=1").await;
    assert_eq!(detailed.status, 200, "{}", detailed.body);
    let header = cells(&detailed.body).remove(0);
    assert_eq!(
        header[9..],
        [
            "StartTime",
            "UserName",
            "Verb",
            "APIPath",
            "Namespace",
            "Name",
            "APIVersion",
            "Resource",
            "SubResource"
        ]
    );
    assert_aligned(&detailed.body);
    let rows = cells(&detailed.body);
    let ours: Vec<&Vec<String>> = rows.iter().filter(|r| r[0] == "queued").collect();
    assert_eq!(
        ours[0][10..],
        ["alice", "list", CM, "default", "", "v1", "configmaps", ""]
    );
    assert_eq!(
        ours[1][10..],
        ["alice", "create", CM, "default", "", "v1", "configmaps", ""]
    );

    let unknown = dump(addr, "admin-token", "dump_nothing").await;
    assert_status(&unknown, 404, "NotFound");

    assert_eq!(held.finish().await.status, 201);
    assert_eq!(waiting.await.unwrap().status, 200);
    // kube's authorization: a non-resource URL, verb get (carol's request takes its seat
    // in `queued` first: the level counts it as dispatched).
    let refused = dump(addr, "carol-token", "dump_queues").await;
    assert_status(&refused, 403, "Forbidden");
    let levels = dump(addr, "admin-token", "dump_priority_levels").await;
    let queued = cells(&levels.body)
        .into_iter()
        .find(|r| r[0] == "queued")
        .unwrap();
    assert_eq!(
        queued[1..],
        ["0", "true", "false", "0", "0", "3", "0", "0", "0"]
    );
    server.shutdown().await;
}

/// Goal: a write's fan-out is estimated by the watches interested in its object, as kube's
/// `GetInterestedWatchCount` counts them (the resource's, its namespace's, its name's), not
/// by every watch of the resource: with 200 watches of `other`'s ConfigMaps, alice's create
/// in `other` holds a final seat for the fan-out (20 seats' work of 50 µs on her level's
/// one: 1 ms), seen in `dump_requests`, and her create in `default` none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writes_fan_out_counts_the_watches_of_its_namespace() {
    const WATCHES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let server = apf_server(dir.path()).await;
    let addr = server.addr;
    create(
        addr,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
    )
    .await;
    let other = "/api/v1/namespaces/other/configmaps";
    let mut watches = Vec::new();
    for _ in 0..WATCHES {
        let (stream, _) = open_watch(addr, &format!("{other}?watch=true"), "admin-token").await;
        watches.push(stream);
    }
    // alice's held create's row in `dump_requests`: its final seats and additional latency.
    let estimate = |body: &str| -> Vec<String> {
        cells(body)
            .into_iter()
            .find(|r| r[0] == "global-default" && r[4] == "alice")
            .map(|r| r[7..9].to_vec())
            .unwrap_or_else(|| panic!("no request of alice in\n{body}"))
    };
    for (path, name, want) in [
        (CM, "in-default", ["0", "0s"]),
        (other, "in-other", ["1", "1ms"]),
    ] {
        let held = hold_at(addr, "alice-token", path, name).await;
        until(|| counts(&server, "global-default", "global-default").0 == 1).await;
        let requests = dump(addr, "admin-token", "dump_requests").await;
        assert_eq!(requests.status, 200, "{}", requests.body);
        assert_eq!(estimate(&requests.body), want, "{path}");
        assert_eq!(held.finish().await.status, 201);
        until(|| counts(&server, "global-default", "global-default").0 == 0).await;
    }
    drop(watches);
    server.shutdown().await;
}
