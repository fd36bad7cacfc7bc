// Everything a user of the mixin may want to change. Override with
//   (import 'mixin.libsonnet') + { _config+:: { misscheduleExporterSelector: 'job="mse"' } }
{
  _config+:: {
    // Selects the exporter's series. The chart's ServiceMonitor sets jobLabel, so the job is
    // misschedule-exporter whatever the release is called.
    misscheduleExporterSelector: 'job="misschedule-exporter"',
    // Selects kube-state-metrics' series (kube-prometheus-stack's default job).
    kubeStateMetricsSelector: 'job="kube-state-metrics"',

    // The label that tells clusters apart on a multi-cluster ruler (Thanos, Mimir). Every alert
    // keeps it; a single cluster without it works unchanged.
    clusterLabel: 'cluster',
    // Show the dashboard's cluster variable (kubernetes-mixin's switch of the same name).
    showMultiCluster: false,

    // %s is the alert name in lower case: docs/runbooks.md has one section per alert.
    runbookURLPattern: 'https://github.com/misschedule-exporter/misschedule-exporter/blob/main/docs/runbooks.md#%s',

    // DaemonSetDrainStuck: an autoscaler_drain longer than this is not a normal drain
    // (45 min: longer than any cluster-autoscaler or Karpenter drain).
    drainStuckSeconds: 2700,
    // Reasons someone has to fix; autoscaler_drain resolves on its own.
    actionableReasons: ['label_drift', 'nfd_change', 'daemonset_changed', 'taint_added', 'node_name_mismatch'],
    // DaemonSetRolloutStuck: misscheduled nodes for these reasons are expected (a drain, a
    // DaemonSet change rolling out), so they alone never make a rollout stuck.
    expectedReasons: ['autoscaler_drain', 'daemonset_changed'],
    // DaemonSetNodeLost: reasons a lost node is someone's to fix. Not autoscaler_drain (the node
    // is going away) nor daemonset_changed (the DaemonSet was changed to leave it, on purpose).
    lostActionableReasons: ['label_drift', 'nfd_change', 'taint_added', 'node_name_mismatch'],
    // DaemonSetCoverageFlapping: this many losses of one key in an hour, for the reasons above,
    // is flapping (an NFD restart drops and re-adds its labels; each time the controller deletes
    // the agent).
    flappingLosses: 3,
    // DaemonSetNodeUncovered: the reasons a node without an available pod is someone's to fix
    // (all but starting, a pod on its way), and how long it may last before it alerts.
    uncoveredActionableReasons: ['create_failed', 'unschedulable', 'image_pull', 'crash_loop', 'config_error', 'not_ready'],
    uncoveredSeconds: 900,

    grafanaDashboardUid: 'misschedule-exporter',
    // kubernetes-mixin's tag, so the dashboard joins kube-prometheus-stack's dashboards dropdown.
    dashboardTags: ['kubernetes-mixin', 'misschedule-exporter'],
    dashboardRefresh: '30s',
    // kubernetes-mixin's dashboards, linked from pod and node cells: its uids are the md5 of the file name.
    podDashboardUid: std.md5('k8s-resources-pod.json'),
    nodeDashboardUid: std.md5('k8s-resources-node.json'),
  },
}
