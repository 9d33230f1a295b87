//! Page-aligned host memory for RDMA buffers: what a queue pair registers
//! locally and what `memory::Buffer` wraps for host-memory runs.
#![allow(unsafe_code, reason = "page-aligned allocation and the slices over it")]

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::cuda::page_size;
use crate::error::Error;

/// Page-aligned, zeroed host memory.
pub struct HostBuf {
    ptr: *mut u8,
    layout: Layout,
}

impl HostBuf {
    pub fn new(size: usize) -> Result<HostBuf, Error> {
        let page = page_size();
        let size = size.div_ceil(page).max(1) * page;
        let layout = Layout::from_size_align(size, page)
            .map_err(|e| Error::InvalidArgument(format!("buffer of {size} bytes: {e}")))?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::InvalidArgument(format!(
                "cannot allocate {size} bytes of host memory"
            )));
        }
        Ok(HostBuf { ptr, layout })
    }
    pub fn len(&self) -> usize {
        self.layout.size()
    }
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len()) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
