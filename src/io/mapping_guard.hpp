// A guard for read-only file mappings whose file may shrink while it is read (issue 21, item 6): a cube
// truncated by another program while `spectral` reads it raised SIGBUS (exit 135). Private to io/.
#pragma once

#include <cstddef>

namespace spectrasift::io_detail {

/// Registers the mapping [begin, begin + bytes) and installs, once, a SIGBUS handler that answers a fault
/// inside a registered mapping by mapping zero pages over the rest of it (the read goes on and sees
/// zeros) and marking it faulted; a SIGBUS anywhere else keeps its default action. Any thread may fault.
/// Returns a handle for the calls below (-1 when every slot is taken: the mapping is then unguarded).
int guard_mapping(void* begin, std::size_t bytes);
/// Forgets the mapping (call before munmap).
void unguard_mapping(int handle);
/// True once a read of the mapping found its file shorter than when it was mapped.
bool mapping_faulted(int handle);

}  // namespace spectrasift::io_detail
