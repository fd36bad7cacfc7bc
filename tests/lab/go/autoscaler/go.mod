// cluster-autoscaler for the lab, built with -tags kwok: the kwok cloud provider scales node groups
// of KWOK nodes. The repository's release tags are no Go module versions, so a commit is pinned
// (master of 2025-06-13, CA 1.33; the newest commit the module proxy serves here). Its replace
// lines are repeated, since a dependency's replace lines do not apply to its dependants.
module misschedule.test/lab/autoscaler

go 1.26.0

tool k8s.io/autoscaler/cluster-autoscaler

require (
	k8s.io/autoscaler/cluster-autoscaler v0.0.0-20250613073258-1959f5f61f6c
	k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240627115740-d52e4b9665d7
)

replace (
	k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.33.1
	k8s.io/code-generator => k8s.io/code-generator v0.33.1
	k8s.io/cri-api => k8s.io/cri-api v0.33.1
	k8s.io/csi-translation-lib => k8s.io/csi-translation-lib v0.33.1
	k8s.io/kube-scheduler => k8s.io/kube-scheduler v0.33.1
	k8s.io/kubectl => k8s.io/kubectl v0.33.1
	k8s.io/mount-utils => k8s.io/mount-utils v0.33.1
	k8s.io/kms => k8s.io/kms v0.33.1
	k8s.io/cri-client => k8s.io/cri-client v0.33.1
)
