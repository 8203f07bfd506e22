//! Allocation tuning for commands that allocate and free large buffers over and over.

/// glibc returns allocations of more than 128 KiB to the kernel when they are freed, so a loop
/// that allocates buffers of a few MiB (a pipeline's decoded fields, a conversion's index
/// entries) gets fresh pages each time, zeroed and faulted in one by one: on this class of
/// machine a third of the CPU time, most of it in the kernel. Allocations up to 32 MiB (the most
/// glibc allows) come from the heap instead, and up to 256 MiB of freed heap is kept for the
/// next buffer: memory stays what the largest buffers in flight need.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocation thresholds; called before the work starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}
