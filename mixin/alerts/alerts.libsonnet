// Alerts that replace kubernetes-mixin's KubeDaemonSetMisScheduled: page on misscheduling someone
// has to fix, stay quiet through ordinary drains (docs/alerting.md, docs/runbooks.md).
//
// Every expression aggregates *by* the labels that identify what it alerts on, never `without`
// a few: prometheus-operator adds job, namespace, service, pod, container, endpoint and instance
// to every target, so only an explicit list folds exporter replicas and the two pods of a rollout.
{
  local c = $._config,
  local args = c {
    reasons: std.join('|', c.actionableReasons),
    expectedReasons: std.join('|', c.expectedReasons),
    lostReasons: std.join('|', c.lostActionableReasons),
    flappingLosses: std.toString(c.flappingLosses),
    // DaemonSetCoverageFlapping's two sides, per replica: losses in the last hour, and those
    // of them whose node is still lost.
    losses: std.rstripChars(|||
      sum without (reason) (
          daemonset_node_losses_total{%(misscheduleExporterSelector)s, reason=~"%(lostReasons)s"}
            - daemonset_node_losses_total{%(misscheduleExporterSelector)s, reason=~"%(lostReasons)s"} offset 1h
          or
          daemonset_node_losses_total{%(misscheduleExporterSelector)s, reason=~"%(lostReasons)s"}
        )
    ||| % self, '\n'),
    stillLost: std.rstripChars(|||
      count without (node, reason, manager) (
          daemonset_lost_node_info{%(misscheduleExporterSelector)s, reason=~"%(lostReasons)s"}
            and ignoring (key, manager)
          daemonset_lost_node_since_timestamp_seconds{%(misscheduleExporterSelector)s} > time() - 3600
        )
    ||| % self, '\n'),
    drainStuckSeconds: std.toString(c.drainStuckSeconds),
    uncoveredReasons: std.join('|', c.uncoveredActionableReasons),
    uncoveredSeconds: std.toString(c.uncoveredSeconds),
    // The row's detail, looked up when the alert is sent: as a label it would restart the
    // alert each time the kubelet words it anew (ErrImagePull, then ImagePullBackOff).
    uncoveredDetail: std.join('', [
      '{{ with query (print `daemonset_uncovered_node_info{%(misscheduleExporterSelector)s,namespace="` $labels.namespace',
      ' `",daemonset="` $labels.daemonset `",node="` $labels.node `",reason="` $labels.reason `"`',
      ' (and $labels.%(clusterLabel)s (print `,%(clusterLabel)s="` $labels.%(clusterLabel)s `"`)) `}`) }}',
      '{{ with (index . 0).Labels.detail }} ({{ . }}){{ end }}{{ end }}',
    ]) % c,
    // " in cluster X" when the alert has a cluster, nothing otherwise.
    inCluster: '{{ with $labels.%s }} in cluster {{ . }}{{ end }}' % c.clusterLabel,
  },
  local rule(name, expr, forDuration, summary, description) = {
    alert: name,
    expr: expr % args,
    'for': forDuration,
    labels: { severity: 'warning' },
    annotations: {
      // Static, so Alertmanager's CommonAnnotations keep it when it groups these alerts.
      summary: summary,
      description: description % args,
      runbook_url: c.runbookURLPattern % std.asciiLower(name),
    },
  },

  prometheusAlerts+:: {
    groups+: [{
      name: 'misschedule-exporter',
      rules: [
        rule(
          'DaemonSetPodMisscheduled',
          |||
            max by (%(clusterLabel)s, namespace, daemonset, pod, node, reason, key) (
              daemonset_misscheduled_pod_info{%(misscheduleExporterSelector)s, reason=~"%(reasons)s"}
            ) == 1
          |||,
          '10m',
          'A DaemonSet pod runs on a node where its DaemonSet should not run.',
          'Pod {{ $labels.namespace }}/{{ $labels.pod }} of DaemonSet {{ $labels.daemonset }} is misscheduled on node {{ $labels.node }}%(inCluster)s: reason {{ $labels.reason }}, key {{ $labels.key }}. Run `misschedule-exporter explain -n {{ $labels.namespace }} --daemonset {{ $labels.daemonset }}` for the fix.',
        ),
        rule(
          'DaemonSetDrainStuck',
          |||
            time() - max by (%(clusterLabel)s, namespace, daemonset, pod, node, reason) (
              daemonset_misscheduled_pod_since_timestamp_seconds{%(misscheduleExporterSelector)s, reason="autoscaler_drain"}
            ) > %(drainStuckSeconds)s
          |||,
          '1m',
          'A node has been draining for longer than a drain takes.',
          'Pod {{ $labels.namespace }}/{{ $labels.pod }} of DaemonSet {{ $labels.daemonset }} has sat on draining node {{ $labels.node }}%(inCluster)s for {{ $value | humanizeDuration }}. The drain is probably stuck: a PodDisruptionBudget, a failing eviction, or an autoscaler that gave up and left its taint behind.',
        ),
        // The controller deleted the agent and the node stays without it; the DaemonSet's status
        // counts nothing wrong. The manager is left out of the labels: a replica that started
        // mid-way may not know it, and the alert must stay one.
        rule(
          'DaemonSetNodeLost',
          |||
            max by (%(clusterLabel)s, namespace, daemonset, node, reason, key) (
              daemonset_lost_node_info{%(misscheduleExporterSelector)s, reason=~"%(lostReasons)s"}
            ) == 1
          |||,
          '10m',
          'A node runs without its DaemonSet pod: the controller deleted it when the node stopped qualifying.',
          'Node {{ $labels.node }}%(inCluster)s lost the pod of DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}: reason {{ $labels.reason }}, key {{ $labels.key }}. The DaemonSet reports itself healthy. Run `kubectl misschedule -n {{ $labels.namespace }} --daemonset {{ $labels.daemonset }} -o wide --from-exporter NAMESPACE/SERVICE` for who changed it and the fix.',
        ),
        // A node the DaemonSet should run on has had no available pod for 15 minutes, for a
        // reason someone has to fix. Measured from when the node went without (the since
        // series outlives a change of reason, as a crash loop's restarts make), so the alert
        // fires at once when the reason changes after the 15 minutes. Replaces
        // kubernetes-mixin's KubeDaemonSetNotScheduled, which counts only the pods the
        // controller could not create, with no node and no reason.
        rule(
          'DaemonSetNodeUncovered',
          |||
            time() - min by (%(clusterLabel)s, namespace, daemonset, node, reason) (
              daemonset_uncovered_node_since_timestamp_seconds{%(misscheduleExporterSelector)s, reason=~"%(uncoveredReasons)s"}
            ) > %(uncoveredSeconds)s
          |||,
          '0m',
          'A node the DaemonSet should run on has no available pod of it.',
          'Node {{ $labels.node }}%(inCluster)s has had no available pod of DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }} for {{ $value | humanizeDuration }}: {{ $labels.reason }}%(uncoveredDetail)s. Run `kubectl misschedule -n {{ $labels.namespace }} --daemonset {{ $labels.daemonset }} -o wide` for the fix.',
        ),
        // Per replica (`without` keeps the target labels that tell replicas apart), then the
        // replica that saw the most, which a restart within the hour does not lower:
        // - losses: in the last hour, for DaemonSetNodeLost's reasons only. cluster-autoscaler
        //   evicts daemon pods from the nodes it scales down, so every scale-down is an
        //   autoscaler_drain loss, and a DaemonSet change leaves its nodes on purpose. A counter
        //   that appeared within the hour counts from 0, which `increase()` would not.
        // - still lost: those of the hour's losses whose node is still lost. One change that
        //   drops many nodes at once and stays is no flapping (DaemonSetNodeLost pages for it);
        //   flapping is losses that did not last.
        rule(
          'DaemonSetCoverageFlapping',
          |||
            max by (%(clusterLabel)s, namespace, daemonset, key) (
              (%(losses)s >= %(flappingLosses)s)
                > (%(stillLost)s or %(losses)s * 0)
            )
          |||,
          '0m',
          'A DaemonSet keeps losing nodes over the same label or taint.',
          'DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}%(inCluster)s lost a node {{ $value }} times in the last hour over {{ $labels.key }}, and not every loss lasted: each time the node stopped qualifying, the controller deleted its pod, and it made a new one when the node qualified again. Something keeps removing and restoring {{ $labels.key }} (node-feature-discovery restarts drop and re-add their labels).',
        ),
        // Silent when kube-state-metrics is absent (no left-hand series) and when the exporter is
        // (no right-hand series; MisscheduleExporterDown covers that).
        rule(
          'DaemonSetMisscheduledUnexplained',
          |||
            max by (%(clusterLabel)s, namespace, daemonset) (
              kube_daemonset_status_number_misscheduled{%(kubeStateMetricsSelector)s}
            )
              > on (%(clusterLabel)s, namespace, daemonset)
            sum by (%(clusterLabel)s, namespace, daemonset) (
              max by (%(clusterLabel)s, namespace, daemonset, reason) (
                daemonset_misscheduled_nodes{%(misscheduleExporterSelector)s}
              )
            )
          |||,
          '15m',
          'kube-state-metrics counts more misscheduled nodes than misschedule-exporter explains.',
          "status.numberMisscheduled of DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}%(inCluster)s has stayed above the exporter's count for 15 minutes. The status lags the objects (a deleted node stays counted until the controller resyncs); otherwise the exporter may be missing permissions or pods.",
        ),
        // kubernetes-mixin's KubeDaemonSetRolloutStuck, drain-aware: the same four ways a
        // rollout stands still, except that misscheduled nodes count only beyond those the
        // exporter explains by an expected reason (a node draining away, a DaemonSet change).
        // Where the exporter has no series for the DaemonSet, none are explained: the stock rule.
        rule(
          'DaemonSetRolloutStuck',
          |||
            (
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_current_number_scheduled{%(kubeStateMetricsSelector)s})
                != on (%(clusterLabel)s, namespace, daemonset)
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_desired_number_scheduled{%(kubeStateMetricsSelector)s})
            or
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_number_misscheduled{%(kubeStateMetricsSelector)s})
                > on (%(clusterLabel)s, namespace, daemonset)
              (
                sum by (%(clusterLabel)s, namespace, daemonset) (
                  max by (%(clusterLabel)s, namespace, daemonset, reason) (
                    daemonset_misscheduled_nodes{%(misscheduleExporterSelector)s, reason=~"%(expectedReasons)s"}
                  )
                )
                  or
                0 * max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_number_misscheduled{%(kubeStateMetricsSelector)s})
              )
            or
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_updated_number_scheduled{%(kubeStateMetricsSelector)s})
                != on (%(clusterLabel)s, namespace, daemonset)
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_desired_number_scheduled{%(kubeStateMetricsSelector)s})
            or
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_number_available{%(kubeStateMetricsSelector)s})
                != on (%(clusterLabel)s, namespace, daemonset)
              max by (%(clusterLabel)s, namespace, daemonset) (kube_daemonset_status_desired_number_scheduled{%(kubeStateMetricsSelector)s})
            )
              and on (%(clusterLabel)s, namespace, daemonset)
            max by (%(clusterLabel)s, namespace, daemonset) (
              changes(kube_daemonset_status_updated_number_scheduled{%(kubeStateMetricsSelector)s}[5m])
            ) == 0
          |||,
          '15m',
          'A DaemonSet rollout has stood still, beyond what drains and DaemonSet changes explain.',
          'DaemonSet {{ $labels.namespace }}/{{ $labels.daemonset }}%(inCluster)s has not finished or progressed for 15 minutes, and misschedule-exporter does not explain it by a drain or a DaemonSet change. Run `kubectl misschedule -n {{ $labels.namespace }} --daemonset {{ $labels.daemonset }} -o wide` and `kubectl -n {{ $labels.namespace }} rollout status ds/{{ $labels.daemonset }}`.',
        ),
        // Per cluster: a cluster whose targets all fail, or (one cluster) no target at all.
        rule(
          'MisscheduleExporterDown',
          |||
            sum by (%(clusterLabel)s) (up{%(misscheduleExporterSelector)s}) == 0
              or
            absent(up{%(misscheduleExporterSelector)s})
          |||,
          '10m',
          'misschedule-exporter is down or not scraped.',
          'No misschedule-exporter target%(inCluster)s has been up for 10 minutes; misscheduled DaemonSet pods go unexplained.',
        ),
        rule(
          'MisscheduleExporterCacheNotReady',
          |||
            min by (%(clusterLabel)s, resource) (misschedule_exporter_cache_synced{%(misscheduleExporterSelector)s}) == 0
              or
            min by (%(clusterLabel)s, resource) (misschedule_exporter_watch_healthy{%(misscheduleExporterSelector)s}) == 0
          |||,
          '10m',
          'A misschedule-exporter cache is not synced or its watch is failing.',
          'The exporter%(inCluster)s serves the last known state for {{ $labels.resource }}; its logs name the failing list or watch (often RBAC).',
        ),
        // Kubelets refresh node status at least every 5 minutes: a live node watch is never quiet for 30.
        // A timestamp of 0 means no watch at all (snapshot mode), not a stalled one.
        rule(
          'MisscheduleExporterNoNodeEvents',
          |||
            time() - max by (%(clusterLabel)s) (misschedule_exporter_last_event_timestamp_seconds{%(misscheduleExporterSelector)s, resource="nodes"} > 0) > 1800
              and on (%(clusterLabel)s)
            max by (%(clusterLabel)s) (misschedule_exporter_cache_objects{%(misscheduleExporterSelector)s, resource="nodes"}) > 0
          |||,
          '5m',
          'misschedule-exporter has received no node events for 30 minutes.',
          'The node watch of the exporter%(inCluster)s looks stalled; its view of taints and labels may be stale.',
        ),
        rule(
          'MisscheduleExporterCredentialReloadFailing',
          |||
            max by (%(clusterLabel)s, file) (misschedule_exporter_credential_reload_failing{%(misscheduleExporterSelector)s}) == 1
          |||,
          '15m',
          'misschedule-exporter cannot load its rotated TLS or authentication files.',
          'The {{ $labels.file }} files of the exporter%(inCluster)s are unusable on disk; it still serves with the previous ones, which may expire or be revoked.',
        ),
      ],
    }],
  },
}
