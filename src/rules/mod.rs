//! Pure rules over the model: the DaemonSet controller's (`eligibility`, with apimachinery's
//! label syntax in `validation`) and ours (`reason`: why a pod is misscheduled;
//! `attribution`: which field manager made the change; `uncovered`: why a node the
//! DaemonSet should run on has no available pod; `admission`: whether the admission guard
//! lets a change through; `arrival`: whether a pod came misscheduled rather than became so,
//! a sign that the index's node is behind).

pub mod admission;
pub mod arrival;
pub mod attribution;
pub mod eligibility;
pub mod reason;
pub mod uncovered;
pub mod validation;
