// misschedule-exporter's monitoring mixin (the kubernetes-mixin layout). scripts/mixin.sh
// renders alerts/misschedule-exporter.rules.yaml and dashboards/misschedule-exporter.json from it.
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
