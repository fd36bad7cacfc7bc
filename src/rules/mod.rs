//! Pure rules over the model: the DaemonSet controller's (`eligibility`, with apimachinery's
//! label syntax in `validation`) and ours (`reason`: why a pod is misscheduled;
//! `attribution`: which field manager made the change).

pub mod attribution;
pub mod eligibility;
pub mod reason;
pub mod validation;
