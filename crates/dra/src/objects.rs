//! The `resource.k8s.io/v1` objects vmtune writes, as hand-written serde structs: only the
//! fields it sets and reads back (k8s-openapi is not a dependency of this workspace). Field
//! names and shapes follow Kubernetes v1.37's `staging/src/k8s.io/api/resource/v1/types.go`;
//! the API server's dry run (`kubectl apply --dry-run=server`) is what checks them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `apiVersion` of every object here.
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// The part of `metadata` vmtune sets (and `resourceVersion` when it reads one back).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// A `ResourceSlice`: one pool's devices of one driver on one node (or a part of the pool,
/// `pool.resourceSliceCount` > 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// Absent from the items of a list the API server answers.
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: ResourceSliceSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    pub driver: String,
    pub pool: ResourcePool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default)]
    pub devices: Vec<Device>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    pub name: String,
    /// Bumped whenever the pool's slices change; the scheduler ignores slices of an older
    /// generation than the newest it sees.
    pub generation: i64,
    pub resource_slice_count: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, Attribute>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Capacity>,
    /// Several claims may share the device, each consuming part of its capacity
    /// (`DRAConsumableCapacity`, beta and on by default in v1.37).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_multiple_allocations: Option<bool>,
}

/// `DeviceAttribute`: exactly one of its members is set (`{int: 0}`, `{string: "x"}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "RawAttribute", try_from = "RawAttribute")]
pub enum Attribute {
    Int(i64),
    Bool(bool),
    String(String),
    Version(String),
}

/// The wire shape of [`Attribute`]: a struct of optional members, so YAML gets a plain map
/// (an enum would be written as a YAML tag, `!int 0`, which Kubernetes does not read).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RawAttribute {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    int: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bool: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    string: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

impl From<Attribute> for RawAttribute {
    fn from(a: Attribute) -> RawAttribute {
        let mut r = RawAttribute::default();
        match a {
            Attribute::Int(v) => r.int = Some(v),
            Attribute::Bool(v) => r.bool = Some(v),
            Attribute::String(v) => r.string = Some(v),
            Attribute::Version(v) => r.version = Some(v),
        }
        r
    }
}

impl TryFrom<RawAttribute> for Attribute {
    type Error = String;

    fn try_from(r: RawAttribute) -> Result<Attribute, String> {
        match (r.int, r.bool, r.string, r.version) {
            (Some(v), None, None, None) => Ok(Attribute::Int(v)),
            (None, Some(v), None, None) => Ok(Attribute::Bool(v)),
            (None, None, Some(v), None) => Ok(Attribute::String(v)),
            (None, None, None, Some(v)) => Ok(Attribute::Version(v)),
            _ => Err("a device attribute has exactly one of int, bool, string, version".into()),
        }
    }
}

/// `DeviceCapacity`: a quantity, and how a claim's request for it is rounded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_policy: Option<RequestPolicy>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPolicy {
    /// What a claim that names no amount consumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Requests are rounded up to `min + k * step` (and refused above `max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_range: Option<CapacityRange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRange {
    pub min: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// A `DeviceClass`: what a claim's `deviceClassName` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    pub spec: DeviceClassSpec,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceClassSpec {
    pub selectors: Vec<DeviceSelector>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSelector {
    pub cel: CelSelector,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CelSelector {
    pub expression: String,
}

/// A `ResourceSliceList` as the API server answers a list.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct ResourceSliceList {
    #[serde(default)]
    pub items: Vec<ResourceSlice>,
}

impl ResourceSlice {
    /// The device of this name, if the slice has it.
    pub fn device(&self, name: &str) -> Option<&Device> {
        self.spec.devices.iter().find(|d| d.name == name)
    }
}

impl Device {
    pub fn int(&self, attribute: &str) -> Option<i64> {
        match self.attributes.get(attribute)? {
            Attribute::Int(v) => Some(*v),
            _ => None,
        }
    }

    pub fn string(&self, attribute: &str) -> Option<&str> {
        match self.attributes.get(attribute)? {
            Attribute::String(v) => Some(v),
            _ => None,
        }
    }

    pub fn bool(&self, attribute: &str) -> Option<bool> {
        match self.attributes.get(attribute)? {
            Attribute::Bool(v) => Some(*v),
            _ => None,
        }
    }
}
