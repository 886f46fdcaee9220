/*
 * eng_crc32c.h - CRC-32C (Castagnoli), the checksum of Kafka record batches.
 *
 * Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF:
 * crc32c("123456789") = 0xE3069283.  eng_crc32c() uses the SSE4.2 crc32
 * instruction when the CPU has it (checked once) and a slicing-by-8 table
 * otherwise; both paths are exported so tests can prove they agree.
 */
#ifndef ENG_CRC32C_H
#define ENG_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over len bytes at data and returns the new CRC. */
uint32_t eng_crc32c(uint32_t crc, const void *data, size_t len);

/* The table-driven path, always available. */
uint32_t eng_crc32c_sw(uint32_t crc, const void *data, size_t len);

/* The SSE4.2 path; only call it when eng_crc32c_hw_available() is true. */
uint32_t eng_crc32c_hw(uint32_t crc, const void *data, size_t len);

bool eng_crc32c_hw_available(void);

#endif
