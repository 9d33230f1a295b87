//! The command line's words for the domain's enums (`--format`, `--color`,
//! `--arch`, `--cpu-vendor`, `--op`, `--memory`): each a clap value enum
//! here, with the words and help the options show, mapped to the domain's
//! type by `From`. An option parses straight into the domain's type
//! (`value_parser = values::parser::<FormatArg, Format>()`), so its field
//! keeps that type and the domain's enums carry no clap.

use crate::bench::memory::MemoryKind;
use crate::bench::pair::protocol::Op;
use crate::facts::arch::Arch;
use crate::facts::CpuVendor;
use crate::output::{Color, Format};
use clap::builder::{EnumValueParser, MapValueParser, TypedValueParser};
use clap::ValueEnum;

/// A cli enum's parser, giving the domain's value.
pub type Parser<A, T> = MapValueParser<EnumValueParser<A>, fn(A) -> T>;

/// The parser of the cli enum `A`, mapped to the domain's `T`: its possible
/// values (and their help) are `A`'s, shown in `--help` as `value_enum`'s.
pub fn parser<A, T>() -> Parser<A, T>
where
    A: ValueEnum + Clone + Send + Sync + 'static,
    T: From<A> + Clone + Send + Sync + 'static,
{
    EnumValueParser::<A>::new().map(T::from as fn(A) -> T)
}

/// `--format`: each command takes the values it writes, and lists only
/// those (src/commands/cli/shared.rs), so no value's help names commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// For people.
    Text,
    /// One JSON document, for scripts.
    Json,
    /// Prometheus text exposition (node-exporter's textfile collector).
    Prometheus,
    /// One self-contained HTML page.
    Html,
}

impl From<FormatArg> for Format {
    fn from(a: FormatArg) -> Self {
        match a {
            FormatArg::Text => Format::Text,
            FormatArg::Json => Format::Json,
            FormatArg::Prometheus => Format::Prometheus,
            FormatArg::Html => Format::Html,
        }
    }
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

impl From<ColorArg> for Color {
    fn from(a: ColorArg) -> Self {
        match a {
            ColorArg::Auto => Color::Auto,
            ColorArg::Always => Color::Always,
            ColorArg::Never => Color::Never,
        }
    }
}

/// `--cpu-vendor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CpuVendorArg {
    Intel,
    Amd,
    Other,
    Unknown,
}

impl From<CpuVendorArg> for CpuVendor {
    fn from(a: CpuVendorArg) -> Self {
        match a {
            CpuVendorArg::Intel => CpuVendor::Intel,
            CpuVendorArg::Amd => CpuVendor::Amd,
            CpuVendorArg::Other => CpuVendor::Other,
            CpuVendorArg::Unknown => CpuVendor::Unknown,
        }
    }
}

/// `--arch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArchArg {
    #[value(name = "x86_64", alias = "amd64")]
    X86_64,
    #[value(name = "aarch64", alias = "arm64")]
    Aarch64,
    /// Another architecture (ppc64le, s390x, riscv64, ...).
    Other,
    Unknown,
}

impl From<ArchArg> for Arch {
    fn from(a: ArchArg) -> Self {
        match a {
            ArchArg::X86_64 => Arch::X86_64,
            ArchArg::Aarch64 => Arch::Aarch64,
            ArchArg::Other => Arch::Other,
            ArchArg::Unknown => Arch::Unknown,
        }
    }
}

/// `bench pair --op`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpArg {
    /// The client writes into the listener's buffer (RDMA WRITE).
    Write,
    /// The client reads the listener's buffer (RDMA READ).
    Read,
    /// Both write into each other's buffer at once.
    Bidir,
}

impl From<OpArg> for Op {
    fn from(a: OpArg) -> Self {
        match a {
            OpArg::Write => Op::Write,
            OpArg::Read => Op::Read,
            OpArg::Bidir => Op::Bidir,
        }
    }
}

/// `--memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MemoryArg {
    /// Host memory (ibv_reg_mr).
    Host,
    /// GPU memory exported as dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr).
    CudaDmabuf,
    /// GPU memory registered directly (ibv_reg_mr; needs nvidia_peermem).
    CudaPeermem,
}

impl From<MemoryArg> for MemoryKind {
    fn from(a: MemoryArg) -> Self {
        match a {
            MemoryArg::Host => MemoryKind::Host,
            MemoryArg::CudaDmabuf => MemoryKind::CudaDmabuf,
            MemoryArg::CudaPeermem => MemoryKind::CudaPeermem,
        }
    }
}
