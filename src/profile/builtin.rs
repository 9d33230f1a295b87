//! Profiles and templates embedded in the binary, so a host needs nothing but
//! the gdrprov binary itself.

pub const PROFILES: &[(&str, &str)] = &[
    (
        "rdma-dmabuf",
        include_str!("../../profiles/rdma-dmabuf.yaml"),
    ),
    (
        "legacy-peermem",
        include_str!("../../profiles/legacy-peermem.yaml"),
    ),
    (
        "gds-iommu-off",
        include_str!("../../profiles/gds-iommu-off.yaml"),
    ),
    (
        "erdma-cloud",
        include_str!("../../profiles/erdma-cloud.yaml"),
    ),
    ("efa", include_str!("../../profiles/efa.yaml")),
];

pub const TEMPLATES: &[(&str, &str)] = &[
    (
        "nccl.conf.hbs",
        include_str!("../../templates/nccl.conf.hbs"),
    ),
    (
        "gdrprov-verify.service.hbs",
        include_str!("../../templates/gdrprov-verify.service.hbs"),
    ),
];

pub fn profile(name: &str) -> Option<&'static str> {
    PROFILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn template(name: &str) -> Option<&'static str> {
    TEMPLATES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn names() -> Vec<&'static str> {
    PROFILES.iter().map(|(n, _)| *n).collect()
}
