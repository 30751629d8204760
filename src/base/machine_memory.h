// How much memory this machine has and this process holds, for the checks and messages that
// say why an allocation cannot work: a KV pool larger than the machine is refused before it
// is allocated (engine.cpp), and an allocation that fails anyway says how much the process
// held of how much there is (out_of_memory_message), not only "out of memory".
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

// Physical memory (sysconf: pages x page size); 0 when the system does not say.
int64_t physical_memory_bytes();

// This process's resident set (/proc/self/statm); 0 when unknown.
int64_t resident_bytes();

// "12.3 GiB": bytes in the largest binary unit that keeps the number at or above 1.
std::string binary_size(int64_t bytes);

// "out of memory: this process held 5.2 GiB resident of the machine's 23.4 GiB (lower --ctx,
// --parallel or --kv-memory, or use a smaller model or type)", with the address-space limit
// when one is set.
std::string out_of_memory_message();

}  // namespace tandem
