// The Grafana dashboard. Every query filters on $cluster, $namespace and $daemonset, and
// aggregates by the labels it shows, so exporter replicas and rollouts fold into one series.
{
  local c = $._config,
  local datasource = { type: 'prometheus', uid: '${datasource}' },
  // The selector every exporter query starts from.
  local sel = '%s, %s="$cluster"' % [c.misscheduleExporterSelector, c.clusterLabel],
  local dsSel = sel + ', namespace=~"$namespace", daemonset=~"$daemonset"',
  local ksmSel = '%s, %s="$cluster", namespace=~"$namespace", daemonset=~"$daemonset"' % [c.kubeStateMetricsSelector, c.clusterLabel],

  local target(refId, expr, legend='') = { datasource: datasource, expr: expr, refId: refId, legendFormat: legend },
  local instant(refId, expr) = target(refId, expr) { instant: true, range: false, format: 'table' },
  local panel(id, type, title, gridPos, targets, description=null) = {
    id: id,
    title: title,
    type: type,
    datasource: datasource,
    targets: targets,
    gridPos: gridPos,
    [if description != null then 'description']: description,
  },
  local timeseries(id, title, gridPos, targets, unit, description=null, stacked=false) =
    panel(id, 'timeseries', title, gridPos, targets, description) {
      fieldConfig: {
        defaults: { unit: unit, min: 0 } +
                  (if stacked then { custom: { stacking: { mode: 'normal' }, drawStyle: 'line', fillOpacity: 30 } } else {}),
        overrides: [],
      },
    },
  local table(id, title, gridPos, targets, organize, description=null, overrides=[]) =
    panel(id, 'table', title, gridPos, targets, description) {
      transformations: [{ id: 'merge', options: {} }, { id: 'organize', options: organize }],
      fieldConfig: { defaults: {}, overrides: overrides },
    },
  // A table cell linking to one of kubernetes-mixin's dashboards, keeping the time range and cluster.
  local linkTo(column, uid, title, vars) = {
    matcher: { id: 'byName', options: column },
    properties: [{
      id: 'links',
      value: [{
        title: title,
        url: '/d/%s/?${__url_time_range}&var-datasource=${datasource}&var-cluster=${cluster}%s' % [uid, vars],
      }],
    }],
  },
  local variable(name, query, all) = {
    name: name,
    label: name,
    type: 'query',
    datasource: datasource,
    query: { query: query, refId: name },
    definition: query,
    refresh: 2,
    sort: 1,
    options: [],
  } + (if all then {
         includeAll: true,
         multi: true,
         allValue: '.*',
         current: { text: 'All', value: '$__all' },
         hide: 0,
       } else {
         includeAll: false,
         multi: false,
         current: {},
         hide: if c.showMultiCluster then 0 else 2,
       }),

  grafanaDashboards+:: {
    'misschedule-exporter.json': {
      uid: c.grafanaDashboardUid,
      title: 'DaemonSet misscheduling',
      description: 'Why DaemonSet pods are misscheduled (misschedule-exporter).',
      tags: c.dashboardTags,
      timezone: 'utc',
      editable: true,
      graphTooltip: 1,
      refresh: c.dashboardRefresh,
      schemaVersion: 39,
      version: 1,
      time: { from: 'now-6h', to: 'now' },
      annotations: { list: [] },
      // kubernetes-mixin's dashboards dropdown.
      links: [{
        title: 'Kubernetes',
        type: 'dashboards',
        tags: ['kubernetes-mixin'],
        asDropdown: true,
        includeVars: true,
        keepTime: true,
        targetBlank: false,
      }],
      templating: {
        list: [
          {
            name: 'datasource',
            label: 'Data source',
            type: 'datasource',
            query: 'prometheus',
            current: {},
            hide: 0,
            options: [],
            refresh: 1,
            regex: '',
          },
          variable('cluster', 'label_values(daemonset_misscheduled_nodes{%s}, %s)' % [c.misscheduleExporterSelector, c.clusterLabel], false),
          variable('namespace', 'label_values(daemonset_misscheduled_nodes{%s}, namespace)' % sel, true),
          variable('daemonset', 'label_values(daemonset_misscheduled_nodes{%s, namespace=~"$namespace"}, daemonset)' % sel, true),
        ],
      },
      panels: [
        timeseries(
          1,
          'Misscheduled nodes by reason',
          { h: 8, w: 12, x: 0, y: 0 },
          [target('A', 'sum by (reason) (max by (namespace, daemonset, reason) (daemonset_misscheduled_nodes{%s}))' % dsSel, '{{reason}}')],
          'short',
          'Nodes running a daemon pod they should not, by reason. autoscaler_drain is expected churn; everything else needs an owner.',
          stacked=true,
        ),
        timeseries(
          2,
          'Misscheduled nodes per DaemonSet, next to kube-state-metrics',
          { h: 8, w: 12, x: 12, y: 0 },
          [
            target('A', 'sum by (namespace, daemonset) (max by (namespace, daemonset, reason) (daemonset_misscheduled_nodes{%s}))' % dsSel, '{{namespace}}/{{daemonset}}'),
            target('B', 'max by (namespace, daemonset) (kube_daemonset_status_number_misscheduled{%s})' % ksmSel, '{{namespace}}/{{daemonset}} (kube-state-metrics)'),
          ],
          'short',
          "The exporter's count and status.numberMisscheduled from kube-state-metrics. They agree once the controller has synced; the status lags the objects in both directions.",
        ),
        table(
          3,
          'Misscheduled pods',
          { h: 10, w: 24, x: 0, y: 8 },
          [
            instant('A', 'max by (namespace, daemonset, pod, node, reason, key, manager) (daemonset_misscheduled_pod_info{%s})' % dsSel),
            instant('B', 'time() - max by (namespace, daemonset, pod, node, reason) (daemonset_misscheduled_pod_since_timestamp_seconds{%s})' % dsSel),
          ],
          {
            excludeByName: { Time: true, 'Value #A': true },
            renameByName: { 'Value #B': 'Age' },
            indexByName: { namespace: 0, daemonset: 1, pod: 2, node: 3, reason: 4, key: 5, manager: 6, 'Value #B': 7 },
          },
          'One row per misscheduled pod with the label or taint key behind it and the field manager that changed it (empty when unknown); pod and node link to their kubernetes-mixin dashboards. Run `misschedule-exporter explain` for a suggested fix.',
          [
            { matcher: { id: 'byName', options: 'Age' }, properties: [{ id: 'unit', value: 's' }] },
            linkTo('pod', c.podDashboardUid, 'Pod ${__value.raw}', '&var-namespace=${__data.fields.namespace}&var-pod=${__value.raw}'),
            linkTo('node', c.nodeDashboardUid, 'Node ${__value.raw}', '&var-node=${__value.raw}'),
          ],
        ),
        table(
          12,
          'Nodes without an available pod',
          { h: 10, w: 16, x: 0, y: 18 },
          [
            instant('A', 'max by (namespace, daemonset, node, pod, reason, detail) (daemonset_uncovered_node_info{%s})' % dsSel),
            instant('B', 'time() - min by (namespace, daemonset, node, reason) (daemonset_uncovered_node_since_timestamp_seconds{%s})' % dsSel),
          ],
          {
            excludeByName: { Time: true, 'Value #A': true },
            renameByName: { 'Value #B': 'Age' },
            indexByName: { namespace: 0, daemonset: 1, node: 2, pod: 3, reason: 4, detail: 5, 'Value #B': 6 },
          },
          "Nodes each DaemonSet should run on where its pod is missing, unplaced or not Ready, with the scheduler's, kubelet's or controller's words (detail). starting is a pod on its way; every other reason needs someone (DaemonSetNodeUncovered after 15 minutes). Run `kubectl misschedule -o wide` for each node's fix.",
          [
            { matcher: { id: 'byName', options: 'Age' }, properties: [{ id: 'unit', value: 's' }] },
            linkTo('pod', c.podDashboardUid, 'Pod ${__value.raw}', '&var-namespace=${__data.fields.namespace}&var-pod=${__value.raw}'),
            linkTo('node', c.nodeDashboardUid, 'Node ${__value.raw}', '&var-node=${__value.raw}'),
          ],
        ),
        timeseries(
          13,
          'Nodes without an available pod, by reason',
          { h: 10, w: 8, x: 16, y: 18 },
          [target('A', 'sum by (reason) (max by (namespace, daemonset, reason) (daemonset_uncovered_nodes{%s}))' % dsSel, '{{reason}}')],
          'short',
          'What numberUnavailable is made of. starting rises and falls with rollouts and new nodes; the rest needs someone.',
          stacked=true,
        ),
        table(
          10,
          'Lost nodes',
          { h: 8, w: 16, x: 0, y: 28 },
          [
            instant('A', 'max by (namespace, daemonset, node, reason, key, manager) (daemonset_lost_node_info{%s})' % dsSel),
            instant('B', 'time() - max by (namespace, daemonset, node, reason) (daemonset_lost_node_since_timestamp_seconds{%s})' % dsSel),
          ],
          {
            excludeByName: { Time: true, 'Value #A': true },
            renameByName: { 'Value #B': 'Age' },
            indexByName: { namespace: 0, daemonset: 1, node: 2, reason: 3, key: 4, manager: 5, 'Value #B': 6 },
          },
          "Nodes a DaemonSet stopped covering: the pod was misscheduled, the controller deleted it, and the node runs without it while the DaemonSet's status looks healthy. The reason, key and manager are the pod's. Only an exporter that watched the pod go knows it.",
          [
            { matcher: { id: 'byName', options: 'Age' }, properties: [{ id: 'unit', value: 's' }] },
            linkTo('node', c.nodeDashboardUid, 'Node ${__value.raw}', '&var-node=${__value.raw}'),
          ],
        ),
        timeseries(
          11,
          'Node losses in the trailing hour, by reason',
          { h: 8, w: 8, x: 16, y: 28 },
          [target('A', |||
            sum by (reason) (
              max by (namespace, daemonset, reason, key) (
                daemonset_node_losses_total{%s} - daemonset_node_losses_total{%s} offset 1h
                or
                daemonset_node_losses_total{%s}
              )
            )
          ||| % [dsSel, dsSel, dsSel], '{{reason}}')],
          'short',
          'Losses of coverage in the hour before each point, from the replica that saw the most. A key that loses nodes again and again is flapping (DaemonSetCoverageFlapping).',
          stacked=true,
        ),
        table(
          4,
          'Eligible and ineligible nodes',
          { h: 8, w: 12, x: 0, y: 36 },
          [
            instant('A', 'max by (namespace, daemonset) (daemonset_eligible_nodes{%s})' % dsSel),
            instant('B', 'max by (namespace, daemonset, reason, key) (daemonset_ineligible_nodes{%s})' % dsSel),
          ],
          { excludeByName: { Time: true }, renameByName: { 'Value #A': 'Eligible', 'Value #B': 'Ineligible' } },
          'Why desiredNumberScheduled is lower than the node count: nodes each DaemonSet skips, by reason and key.',
        ),
        timeseries(
          5,
          'Ineligible nodes by reason',
          { h: 8, w: 12, x: 12, y: 36 },
          [target('A', 'sum by (daemonset, reason) (max by (namespace, daemonset, reason, key) (daemonset_ineligible_nodes{%s}))' % dsSel, '{{daemonset}}: {{reason}}')],
          'short',
        ),
        panel(6, 'stat', 'Exporter: targets up', { h: 6, w: 6, x: 0, y: 44 }, [target('A', 'sum(up{%s})' % sel, 'up')]),
        table(
          7,
          'Exporter: caches synced and watches healthy',
          { h: 6, w: 6, x: 6, y: 44 },
          [
            instant('A', 'min by (resource) (misschedule_exporter_cache_synced{%s})' % sel),
            instant('B', 'min by (resource) (misschedule_exporter_watch_healthy{%s})' % sel),
            instant('C', 'max by (resource) (misschedule_exporter_cache_objects{%s})' % sel),
          ],
          { excludeByName: { Time: true }, renameByName: { 'Value #A': 'Synced', 'Value #B': 'Healthy', 'Value #C': 'Objects' } },
        ),
        timeseries(
          8,
          'Exporter: watch events and errors',
          { h: 6, w: 6, x: 12, y: 44 },
          [
            target('A', 'sum by (resource) (rate(misschedule_exporter_watch_events_total{%s}[$__rate_interval]))' % sel, '{{resource}} events'),
            target('B', 'sum by (resource, reason) (rate(misschedule_exporter_watch_errors_total{%s}[$__rate_interval]))' % sel, '{{resource}} errors: {{reason}}'),
            target('C', 'sum by (resource) (rate(misschedule_exporter_watch_stalls_total{%s}[$__rate_interval]))' % sel, '{{resource}} stalls'),
          ],
          'ops',
        ),
        timeseries(
          9,
          'Exporter: event classification p99',
          { h: 6, w: 6, x: 18, y: 44 },
          [target('A', 'histogram_quantile(0.99, sum by (le) (rate(misschedule_exporter_classification_duration_seconds_bucket{%s}[$__rate_interval])))' % sel, 'p99')],
          's',
        ),
      ],
    },
  },
}
