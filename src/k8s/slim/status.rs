//! What a daemon pod's status says of it being available, as the exporter reads it: the
//! phase, the Ready and PodScheduled conditions, and why a container waits. Decoded with
//! field visitors, so that a healthy pod's status parses no time and allocates nothing.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

use super::parsed_str;

/// Of a pod's status: the phase (a deleted terminal pod no longer counts), and what says
/// whether it is available and why not. A healthy pod's status decodes without allocating:
/// its conditions carry no reason or message, and no container waits.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// `Failed` or `Succeeded`, read without allocating.
    #[serde(default, rename = "phase", deserialize_with = "terminal_phase")]
    pub terminal: bool,
    #[serde(default, deserialize_with = "nullable")]
    pub conditions: Conditions,
    #[serde(default, deserialize_with = "nullable")]
    pub init_container_statuses: Vec<ContainerStatus>,
    #[serde(default, deserialize_with = "nullable")]
    pub container_statuses: Vec<ContainerStatus>,
}

/// Of a pod's conditions, the first Ready and the first PodScheduled, the two availability
/// is read from (`read_health`); no list is built for the others.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conditions {
    ready: Option<PodCondition>,
    scheduled: Option<PodCondition>,
}

impl Conditions {
    /// The first condition of `kind`; `None` for `Other`, which is not kept.
    pub fn get(&self, kind: ConditionKind) -> Option<&PodCondition> {
        match kind {
            ConditionKind::Ready => self.ready.as_ref(),
            ConditionKind::PodScheduled => self.scheduled.as_ref(),
            ConditionKind::Other => None,
        }
    }
}

impl FromIterator<PodCondition> for Conditions {
    fn from_iter<I: IntoIterator<Item = PodCondition>>(conditions: I) -> Self {
        let mut kept = Self::default();
        for condition in conditions {
            let slot = match condition.kind {
                ConditionKind::Ready => &mut kept.ready,
                ConditionKind::PodScheduled => &mut kept.scheduled,
                ConditionKind::Other => continue,
            };
            slot.get_or_insert(condition);
        }
        kept
    }
}

impl<'de> Deserialize<'de> for Conditions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Elements;
        impl<'de> Visitor<'de> for Elements {
            type Value = Conditions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of pod conditions")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Conditions, A::Error> {
                std::iter::from_fn(|| seq.next_element::<PodCondition>().transpose()).collect()
            }
        }
        deserializer.deserialize_seq(Elements)
    }
}

/// A pod condition. Of the others (Initialized, ContainersReady, …) only the kind is kept;
/// Ready and PodScheduled keep when they moved, and why when they are not True. So a
/// healthy pod's conditions parse no time and allocate nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodCondition {
    pub kind: ConditionKind,
    /// `status` is `True`.
    pub true_: bool,
    pub reason: Option<String>,
    pub message: Option<String>,
    /// `lastTransitionTime`, unix seconds.
    pub last_transition: Option<i64>,
}

impl<'de> Deserialize<'de> for PodCondition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = PodCondition;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a pod condition")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<PodCondition, A::Error> {
                let mut condition = PodCondition::default();
                let (mut reason, mut message, mut at) = (None, None, None);
                let text = |value: Option<BorrowedOrOwned<'de>>| value.map(|s| s.0);
                while let Some(key) = map.next_key::<ConditionField>()? {
                    match key {
                        ConditionField::Type => condition.kind = map.next_value::<Kind>()?.0,
                        ConditionField::Status => condition.true_ = map.next_value::<IsTrue>()?.0,
                        ConditionField::Reason => reason = text(map.next_value()?),
                        ConditionField::Message => message = text(map.next_value()?),
                        ConditionField::LastTransitionTime => at = text(map.next_value()?),
                        ConditionField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                if condition.kind != ConditionKind::Other {
                    condition.last_transition =
                        at.and_then(|t| t.parse::<jiff::Timestamp>().ok()).map(|t| t.as_second());
                    if !condition.true_ {
                        condition.reason = reason.map(Cow::into_owned);
                        condition.message = message.map(Cow::into_owned);
                    }
                }
                Ok(condition)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[derive(Default)]
enum ConditionField {
    Type,
    Status,
    Reason,
    Message,
    LastTransitionTime,
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for ConditionField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parsed_str(deserializer, |key| match key {
            "type" => ConditionField::Type,
            "status" => ConditionField::Status,
            "reason" => ConditionField::Reason,
            "message" => ConditionField::Message,
            "lastTransitionTime" => ConditionField::LastTransitionTime,
            _ => ConditionField::Other,
        })
    }
}

struct Kind(ConditionKind);

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        condition_kind(deserializer).map(Kind)
    }
}

struct IsTrue(bool);

impl<'de> Deserialize<'de> for IsTrue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        is_true(deserializer).map(IsTrue)
    }
}

/// The conditions availability is read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConditionKind {
    PodScheduled,
    Ready,
    #[default]
    Other,
}

/// A container's status. Its name and image are kept only while it waits, the one time a
/// detail names them: every status update of every running pod would otherwise allocate
/// both.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    pub state: ContainerState,
    pub last_state: ContainerState,
}

impl<'de> Deserialize<'de> for ContainerStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ContainerStatus;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a container status")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<ContainerStatus, A::Error> {
                let (mut name, mut image): (Option<Cow<'de, str>>, Option<Cow<'de, str>>) = (None, None);
                let mut status = ContainerStatus::default();
                while let Some(key) = map.next_key::<ContainerField>()? {
                    match key {
                        ContainerField::Name => name = map.next_value::<Option<BorrowedOrOwned<'de>>>()?.map(|s| s.0),
                        ContainerField::Image => image = map.next_value::<Option<BorrowedOrOwned<'de>>>()?.map(|s| s.0),
                        ContainerField::State => {
                            status.state = map.next_value::<Option<ContainerState>>()?.unwrap_or_default();
                        }
                        ContainerField::LastState => {
                            status.last_state = map.next_value::<Option<ContainerState>>()?.unwrap_or_default();
                        }
                        ContainerField::Other => {
                            map.next_value::<de::IgnoredAny>()?;
                        }
                    }
                }
                if status.state.waiting.is_some() {
                    status.name = name.map(Cow::into_owned).unwrap_or_default();
                    status.image = image.map(Cow::into_owned).unwrap_or_default();
                }
                Ok(status)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// The fields of a container status the exporter reads, named without allocating.
#[derive(Default)]
enum ContainerField {
    Name,
    Image,
    State,
    LastState,
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for ContainerField {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parsed_str(deserializer, |key| match key {
            "name" => ContainerField::Name,
            "image" => ContainerField::Image,
            "state" => ContainerField::State,
            "lastState" => ContainerField::LastState,
            _ => ContainerField::Other,
        })
    }
}

/// A string borrowed from the input where it can be (no escapes), owned where it cannot.
struct BorrowedOrOwned<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for BorrowedOrOwned<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = BorrowedOrOwned<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(BorrowedOrOwned(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct ContainerState {
    pub waiting: Option<Waiting>,
    pub terminated: Option<Terminated>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct Waiting {
    pub reason: Option<String>,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Terminated {
    #[serde(default, deserialize_with = "nullable")]
    pub exit_code: i32,
    /// A container that restarted keeps its last exit here on every status update: the
    /// kubelet's usual reasons are read as static strings.
    #[serde(default, deserialize_with = "exit_reason")]
    pub reason: Option<Cow<'static, str>>,
}

fn exit_reason<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Cow<'static, str>>, D::Error> {
    parsed_str(deserializer, |reason| Some(Terminated::reason_of(reason)))
}

impl Terminated {
    /// A termination reason, the common ones as static text.
    pub(in crate::k8s) fn reason_of(reason: &str) -> Cow<'static, str> {
        let known = ["Error", "Completed", "OOMKilled", "ContainerCannotRun", "StartError", "DeadlineExceeded"];
        known.into_iter().find(|k| *k == reason).map_or_else(|| Cow::Owned(reason.to_owned()), Cow::Borrowed)
    }
}

/// A field sent as `null` reads as its default, as the API server's own decoding does.
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(deserializer: D) -> Result<T, D::Error> {
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

fn is_true<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, |s| s == "True")
}

fn condition_kind<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ConditionKind, D::Error> {
    parsed_str(deserializer, ConditionKind::parse)
}

impl ConditionKind {
    pub(in crate::k8s) fn parse(kind: &str) -> Self {
        match kind {
            "PodScheduled" => Self::PodScheduled,
            "Ready" => Self::Ready,
            _ => Self::Other,
        }
    }
}

fn terminal_phase<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    parsed_str(deserializer, is_terminal_phase)
}

/// `podutil.IsPodTerminal`.
pub fn is_terminal_phase(phase: &str) -> bool {
    matches!(phase, "Failed" | "Succeeded")
}
