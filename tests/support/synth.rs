//! A synthetic cluster shaped like a real one: nodes with varied label sets (13 to 15
//! labels, NFD's among them, and NFD's annotation listing them), taints, four conditions,
//! twelve images and the managedFields of the kubelet, NFD and whoever tainted them;
//! DaemonSets with selectors, affinities and tolerations, their ControllerRevisions, and
//! daemon pods exactly as the DaemonSet controller writes them (labels, controller
//! ownerReference, `matchFields` affinity, template + default tolerations), with realistic
//! container specs and status, and the managedFields of the controller-manager and the
//! kubelet. One daemon pod in a hundred waits on an image it cannot pull,
//! as the kubelet writes it (`uncovered`).
#![allow(dead_code)]

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

pub const DRAIN_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub nodes: usize,
    pub daemonsets: usize,
    /// Nodes per hundred that are being drained (every DaemonSet's pod there is misscheduled).
    pub draining_percent: usize,
}

const ZONES: [&str; 3] = ["eu-west-1a", "eu-west-1b", "eu-west-1c"];
const INSTANCE_TYPES: [&str; 5] = ["m6i.2xlarge", "m6i.4xlarge", "c6i.4xlarge", "r6i.2xlarge", "g5.2xlarge"];
const NODE_GROUPS: [&str; 4] = ["general-a", "general-b", "infra", "gpu"];

/// A UID shaped as the API server mints them (a lowercase UUID), unique per kind and (a, b).
fn uid(kind: u8, a: usize, b: usize) -> String {
    format!("{kind:08x}-0000-4000-8{a:03x}-{b:012x}")
}

pub fn node_name(i: usize) -> String {
    format!("ip-10-{}-{}-{}.eu-west-1.compute.internal", i / 65536 % 256, i / 256 % 256, i % 256)
}

/// What a chart typically puts on a daemon pod's template, and so on each of its pods: the
/// classifier reads none of it.
fn template_annotations(j: usize) -> Value {
    json!({"kubectl.kubernetes.io/default-container": "agent", "checksum/config": format!("{:064x}", j * 7919 + 1)})
}

fn is_gpu(i: usize) -> bool {
    i.is_multiple_of(20)
}
fn is_infra(i: usize) -> bool {
    i % 10 == 1
}
fn has_avx512(i: usize) -> bool {
    i.is_multiple_of(2)
}

impl Shape {
    /// Whether DaemonSet `j`'s pod on node `i` waits on an image it cannot pull: one in a
    /// hundred, spread over every DaemonSet and node.
    pub fn uncovered(&self, j: usize, i: usize) -> bool {
        (i + 37 * j) % 100 == 50
    }

    pub fn draining(&self, i: usize) -> bool {
        self.draining_percent > 0 && i % (100 / self.draining_percent) == 3
    }

    pub fn node(&self, i: usize) -> Node {
        let name = node_name(i);
        let mut labels = serde_json::Map::new();
        for (k, v) in [
            ("kubernetes.io/hostname", name.as_str()),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("topology.kubernetes.io/zone", ZONES[i % 3]),
            ("topology.kubernetes.io/region", "eu-west-1"),
            ("node.kubernetes.io/instance-type", INSTANCE_TYPES[i % 5]),
            ("karpenter.sh/capacity-type", if i.is_multiple_of(3) { "spot" } else { "on-demand" }),
            ("node-role.kubernetes.io/worker", ""),
            ("eks.amazonaws.com/nodegroup", NODE_GROUPS[i % NODE_GROUPS.len()]),
            ("feature.node.kubernetes.io/kernel-version.major", "6"),
            ("feature.node.kubernetes.io/cpu-model.vendor_id", "Intel"),
            ("feature.node.kubernetes.io/system-os_release.ID", "bottlerocket"),
        ] {
            labels.insert(k.into(), json!(v));
        }
        labels.insert("workload".into(), json!(if is_infra(i) { "infra" } else { "general" }));
        if has_avx512(i) {
            labels.insert("feature.node.kubernetes.io/cpu-cpuid.AVX512F".into(), json!("true"));
        }
        if is_gpu(i) {
            labels.insert("nvidia.com/gpu.present".into(), json!("true"));
        }
        let mut taints = vec![];
        if is_gpu(i) {
            taints.push(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}));
        }
        if self.draining(i) {
            taints.push(json!({"key": DRAIN_TAINT, "value": "1767225600", "effect": "NoSchedule"}));
        }
        let managed_fields = managed_fields(&labels, !taints.is_empty(), self.draining(i), is_gpu(i));
        // NFD lists the labels it manages, without its prefix.
        let nfd_labels: Vec<&str> =
            labels.keys().filter_map(|k| k.strip_prefix("feature.node.kubernetes.io/")).collect();
        let condition = |kind: &str, status: &str, reason: &str| {
            json!({"type": kind, "status": status, "reason": reason, "message": format!("kubelet reports {reason}"),
                   "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        // What the kubelet reports of the images on the node: most of a real node's bytes.
        let images: Vec<Value> = (0..12)
            .map(|k| {
                let repo = format!("registry.example/team-{k}/image-{}", (i + k) % 40);
                json!({"names": [format!("{repo}@sha256:{:064x}", i * 12 + k), format!("{repo}:v1.{k}.0")], "sizeBytes": 10_000_000 + k * 1_000_003})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid(1, 0, i), "resourceVersion": "1", "labels": labels,
                         "managedFields": managed_fields,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                                         "nfd.node.kubernetes.io/feature-labels": nfd_labels.join(",")}},
            "spec": {"providerID": format!("aws:///eu-west-1a/i-{i:017x}"), "taints": taints},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                                      condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                                      condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                                      condition("Ready", "True", "KubeletReady")],
                       "images": images,
                       "nodeInfo": {"kubeletVersion": "v1.33.1", "osImage": "Bottlerocket", "kernelVersion": "6.1.0", "containerRuntimeVersion": "containerd://1.7",
                                    "architecture": "amd64", "operatingSystem": "linux", "bootID": "b", "machineID": "m", "systemUUID": "s", "kubeProxyVersion": "v1.33.1"}}
        }))
        .unwrap()
    }

    /// DaemonSet `j`'s pod spec. Every DaemonSet runs on every node (5,000 × 40 = 200,000
    /// pods), but each gets there differently, so eligibility checks do realistic work:
    /// nodeSelectors, NFD labels, multi-term and NotIn/Exists affinities, tolerations.
    fn template_spec(&self, j: usize) -> Value {
        let gpu = json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"});
        let mut spec = json!({
            "containers": [{
                "name": "agent", "image": format!("registry.example/agent-{j}:1.{j}.0"),
                "args": ["--config=/etc/agent/config.yaml", "--log-level=info"],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                        {"name": "CLUSTER", "value": "prod-eu-west-1"}],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/agent"}, {"name": "host-proc", "mountPath": "/host/proc", "readOnly": true}],
                "securityContext": {"readOnlyRootFilesystem": true}
            }],
            "volumes": [{"name": "config", "configMap": {"name": format!("agent-{j}")}}, {"name": "host-proc", "hostPath": {"path": "/proc"}}],
            "serviceAccountName": format!("agent-{j}"),
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, gpu]
        });
        let affinity = |terms: Value| json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
        match j % 8 {
            1 => spec["nodeSelector"] = json!({"kubernetes.io/os": "linux"}),
            2 => {
                spec["nodeSelector"] =
                    json!({"feature.node.kubernetes.io/kernel-version.major": "6", "kubernetes.io/arch": "amd64"})
            }
            3 => {
                spec["affinity"] = affinity(json!([{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ZONES},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]))
            }
            4 => {
                spec["affinity"] = affinity(json!([
                {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]},
                {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}]))
            }
            5 => {
                spec["tolerations"] = json!([{"operator": "Exists", "effect": "NoExecute"}, gpu]);
                spec["hostNetwork"] = json!(true);
            }
            6 => {
                spec["affinity"] = affinity(
                    json!([{"matchExpressions": [{"key": "workload", "operator": "NotIn", "values": ["batch"]}]}]),
                )
            }
            7 => {
                spec["affinity"] = affinity(
                    json!([{"matchExpressions": [{"key": "node-role.kubernetes.io/worker", "operator": "Exists"}]}]),
                )
            }
            _ => {}
        }
        spec
    }

    pub fn daemonset(&self, j: usize) -> DaemonSet {
        let name = format!("agent-{j}");
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace(j), "uid": uid(2, j, 0), "generation": 2, "resourceVersion": "1"},
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                "template": {"metadata": {"labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "observability"},
                                          "annotations": template_annotations(j)},
                             "spec": self.template_spec(j)},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
            },
            "status": {"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}
        }))
        .unwrap()
    }

    pub fn revision(&self, j: usize, generation: usize) -> ControllerRevision {
        let name = format!("agent-{j}");
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": generation,
            "metadata": {"name": format!("{name}-{}", hash(j, generation)), "namespace": namespace(j),
                         "uid": uid(3, j, generation),
                         "labels": {"app.kubernetes.io/name": name, "controller-revision-hash": hash(j, generation)},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid(2, j, 0), "controller": true, "blockOwnerDeletion": true}]},
            "data": {"spec": {"template": {"$patch": "replace",
                "metadata": {"labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "observability"},
                             "annotations": template_annotations(j)},
                "spec": self.template_spec(j)}}}
        }))
        .unwrap()
    }

    /// The pod the controller made for DaemonSet `j` on node `i`; `nonce` varies its status.
    pub fn pod(&self, j: usize, i: usize, nonce: u64) -> Pod {
        let name = format!("agent-{j}");
        let node = node_name(i);
        let mut spec = self.template_spec(j);
        spec["nodeName"] = json!(node);
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
        let tolerations = spec["tolerations"].as_array_mut().unwrap();
        for (key, effect) in [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/disk-pressure", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule"),
            ("node.kubernetes.io/pid-pressure", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ] {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": effect}));
        }
        let mut metadata = json!({
            "name": format!("{name}-{:05x}", (i * 7919 + j) % 0xfffff), "generateName": format!("{name}-"),
            "namespace": namespace(j), "uid": uid(4, j, i), "resourceVersion": nonce.to_string(),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "observability",
                       "controller-revision-hash": hash(j, 2), "pod-template-generation": "2"},
            "annotations": template_annotations(j),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid(2, j, 0), "controller": true, "blockOwnerDeletion": true}]
        });
        let status = if self.uncovered(j, i) { image_pull_status(j, i) } else { running_status(j, i, nonce) };
        metadata["managedFields"] = pod_managed_fields(&metadata, &spec, &status);
        serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}),
        )
        .unwrap()
    }

    /// Pods on nodes their DaemonSet should run on that are not available: the
    /// `uncovered` ones off the draining nodes (those are misscheduled instead).
    pub fn expected_uncovered_nodes(&self) -> usize {
        self.pod_slots().filter(|&(j, i)| self.uncovered(j, i) && !self.draining(i)).count()
    }

    /// Every (DaemonSet, node) pair: each has a pod. In `pod_slot`'s order.
    pub fn pod_slots(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.pods() as u64).map(|n| self.pod_slot(n))
    }

    /// The pod slot numbered `n`, modulo their count: DaemonSet by DaemonSet. Computed, not
    /// looked up: the scale bench picks one per event, and a table of them (41 MB at 65,000
    /// nodes) read at random evicted the index's own lines between timed batches, more the
    /// bigger the cluster, where a watcher's decoding reads only the event.
    pub fn pod_slot(&self, n: u64) -> (usize, usize) {
        let slot = (n % self.pods() as u64) as usize;
        (slot / self.nodes, slot % self.nodes)
    }

    pub fn pods(&self) -> usize {
        self.nodes * self.daemonsets
    }

    /// Misscheduled pods: every DaemonSet's pod on a draining node.
    pub fn expected_misscheduled_pods(&self) -> usize {
        (0..self.nodes).filter(|&i| self.draining(i)).count() * self.daemonsets
    }
}

fn running_status(j: usize, i: usize, nonce: u64) -> Value {
    json!({
        "phase": "Running", "hostIP": format!("10.0.{}.{}", i / 256 % 256, i % 256), "podIP": format!("10.1.{}.{}", i / 256 % 256, i % 256),
        "startTime": "2026-01-01T00:00:05Z", "qosClass": "Burstable",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"},
                       {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"}],
        "containerStatuses": [{"name": "agent", "ready": true, "restartCount": nonce % 3, "image": format!("registry.example/agent-{j}:1.{j}.0"),
                               "imageID": "registry.example/agent@sha256:0123456789abcdef", "containerID": format!("containerd://{nonce:064x}"),
                               "started": true, "state": {"running": {"startedAt": "2026-01-01T00:00:09Z"}}}]
    })
}

/// What the kubelet writes for a pod whose image will not pull.
fn image_pull_status(j: usize, i: usize) -> Value {
    let image = format!("registry.example/agent-{j}:1.{j}.1");
    json!({
        "phase": "Pending", "hostIP": format!("10.0.{}.{}", i / 256 % 256, i % 256),
        "startTime": "2026-01-01T00:00:05Z", "qosClass": "Burstable",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                       {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
                        "message": "containers with unready status: [agent]", "lastTransitionTime": "2026-01-01T00:00:01Z"}],
        "containerStatuses": [{"name": "agent", "ready": false, "restartCount": 0, "image": image, "imageID": "", "started": false,
                               "state": {"waiting": {"reason": "ImagePullBackOff", "message": format!("Back-off pulling image \"{image}\"")}}}]
    })
}

fn namespace(j: usize) -> &'static str {
    ["monitoring", "kube-system", "logging", "security"][j % 4]
}

fn hash(j: usize, generation: usize) -> String {
    format!("{:x}", 0x5d8f_0000_u64 + (j as u64) * 31 + generation as u64)
}

/// managedFields as a cluster writes them for a daemon pod: the controller-manager owns what
/// it created (metadata and spec), the kubelet the status, as a status subresource entry.
/// Together about 40% of a pod's JSON: 3.7 of 8.8 KB in one the lab's 1.37 made, 2.4 of 5.5 here.
fn pod_managed_fields(metadata: &Value, spec: &Value, status: &Value) -> Value {
    let mut created = fields_of(metadata);
    if let Some(owned) = created.as_object_mut() {
        for server_set in ["f:name", "f:namespace", "f:uid", "f:resourceVersion", "f:creationTimestamp"] {
            owned.remove(server_set);
        }
    }
    let at = "2026-01-01T00:00:05Z";
    json!([
        {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": created, "f:spec": fields_of(spec)}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": at, "subresource": "status", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": fields_of(status)}}
    ])
}

/// The field set (FieldsV1) of an object, as server-side apply records it: `f:` per field, a
/// map or an object with `.` for itself, and a list of objects keyed by each member's
/// `uid`, `name` or `type` (`k:`); any other list is atomic.
fn fields_of(value: &Value) -> Value {
    let Value::Object(fields) = value else { return json!({}) };
    Value::Object(fields.iter().map(|(name, value)| (format!("f:{name}"), field(value))).collect())
}

fn field(value: &Value) -> Value {
    let keyed = |item: &Value| {
        ["uid", "name", "type"].into_iter().find_map(|key| Some(format!("k:{{\"{key}\":{}}}", item.get(key)?)))
    };
    match value {
        Value::Object(_) => {
            let mut set = fields_of(value);
            if let Some(fields) = set.as_object_mut() {
                fields.insert(".".into(), json!({}));
            }
            set
        }
        // Keyed only if every member has a key; else the list is atomic.
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| Some((keyed(item)?, field(item))))
            .collect::<Option<serde_json::Map<_, _>>>()
            .map_or_else(|| json!({}), Value::Object),
        _ => json!({}),
    }
}

/// managedFields as a 1.33 cluster writes them for such a node: kubelet owns its own labels
/// and (as a status subresource entry, most of the bytes) the status; NFD its feature labels;
/// the controller-manager an annotation; the taint list its last writer.
fn managed_fields(labels: &serde_json::Map<String, Value>, tainted: bool, draining: bool, gpu: bool) -> Value {
    let owned = |keep: &dyn Fn(&str) -> bool| -> serde_json::Map<String, Value> {
        labels.keys().filter(|k| keep(k)).map(|k| (format!("f:{k}"), json!({}))).collect()
    };
    let mut kubelet_labels = owned(&|k| k.starts_with("kubernetes.io/") || k.starts_with("node.kubernetes.io/"));
    kubelet_labels.insert(".".into(), json!({}));
    let condition = |t: &str| {
        (
            format!("k:{{\"type\":\"{t}\"}}"),
            json!({".": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}),
        )
    };
    let conditions: serde_json::Map<String, Value> =
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"].map(condition).into_iter().collect();
    let at = "2026-01-01T00:00:00Z";
    let mut entries = vec![
        json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                                           "f:labels": kubelet_labels},
                            "f:spec": {"f:providerID": {}}}}),
        json!({"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:annotations": {"f:node.alpha.kubernetes.io/ttl": {}}}}}),
        json!({"manager": "nfd-master", "operation": "Update", "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:annotations": {"f:nfd.node.kubernetes.io/feature-labels": {}},
                                           "f:labels": owned(&|k| k.starts_with("feature.node.kubernetes.io/"))}}}),
        json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": at, "subresource": "status", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
                                         "f:capacity": {"f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {}},
                                         "f:conditions": conditions, "f:daemonEndpoints": {"f:kubeletEndpoint": {"f:Port": {}}},
                                         "f:images": {}, "f:nodeInfo": {"f:bootID": {}, "f:kernelVersion": {}, "f:osImage": {}}}}}),
    ];
    if tainted {
        let manager = if draining {
            "cluster-autoscaler"
        } else if gpu {
            "gpu-operator"
        } else {
            "kubectl-taint"
        };
        entries.push(
            json!({"manager": manager, "operation": "Update", "apiVersion": "v1", "time": at, "fieldsType": "FieldsV1",
                            "fieldsV1": {"f:spec": {"f:taints": {}}}}),
        );
    }
    Value::Array(entries)
}
