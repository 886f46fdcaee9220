#!/usr/bin/env node
/*
 * gen.js - writes RecordBatch v2 files exactly as the kafkajs 2.2.4 producer
 * builds them, for logstore's binary-append tests (tests/integration/
 * test_binary_append.c), plus MANIFEST.json describing every file.
 *
 * The batches come from kafkajs's own internal encoder
 * (src/protocol/recordBatch/v0 + recordBatch/record/v0), driven the way the
 * producer drives it (src/protocol/requests/produce/v3/request.js:
 * timestamps sorted with JS's default sort, firstTimestamp = the smallest,
 * maxTimestamp = the largest, offsetDelta = index).  Every batch is then
 * checked twice with kafkajs itself: it must equal the record set inside a
 * real Produce v3 request built from the same messages, and kafkajs's
 * decoder must read back the records written to the manifest.
 *
 * Codecs: gzip is built into kafkajs; snappy, lz4 and zstd come from the
 * plugins in package.json.  A plugin that is not installed is skipped and
 * listed under "skipped" in the manifest (see README.md).
 *
 * Usage (from a scratch copy holding node_modules, see README.md):
 *   node gen.js [output-dir]        default: the directory of this script
 */
'use strict'

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')

const { CompressionTypes, CompressionCodecs } = require('kafkajs')
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0')
const Record = require('kafkajs/src/protocol/recordBatch/record/v0')
const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder')
const Decoder = require('kafkajs/src/protocol/decoder')
const ProduceV3 = require('kafkajs/src/protocol/requests/produce/v3/request')
const Long = require('kafkajs/src/utils/long')

const outDir = path.resolve(process.argv[2] || __dirname)
const CODEC_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd']

/* ---- codec plugins ------------------------------------------------------- */

const plugins = {}
const skipped = {}

function tryPlugin(type, name, make) {
  try {
    CompressionCodecs[type] = make(require(name))
    plugins[CODEC_NAMES[type]] = `${name}@${require(`${name}/package.json`).version}`
  } catch (e) {
    skipped[CODEC_NAMES[type]] = `${name} not usable: ${e.message.split('\n')[0]}`
  }
}

plugins.gzip = 'built into kafkajs (node zlib)'
tryPlugin(CompressionTypes.Snappy, 'kafkajs-snappy', m => m)
tryPlugin(CompressionTypes.LZ4, 'kafkajs-lz4', M => new M().codec)
tryPlugin(CompressionTypes.ZSTD, '@kafkajs/zstd', m => m())

/* ---- batch building, as produce/v3/request.js does it -------------------- */

/* messages: [{key, value, timestamp (string), headers}] */
async function buildBatch(messages, opts = {}) {
  const compression = opts.compression || CompressionTypes.None
  const timestamps = messages
    .map(m => m.timestamp)
    .filter(t => t != null)
    .sort()
  if (timestamps.length !== messages.length)
    throw new Error('every message needs a timestamp: the files must be reproducible')
  const firstTimestamp = timestamps[0]
  const maxTimestamp = timestamps[timestamps.length - 1]
  const records = messages.map((message, i) =>
    Record({ ...message, offsetDelta: i, timestampDelta: message.timestamp - firstTimestamp })
  )
  const fields = {
    compression,
    records,
    firstTimestamp,
    maxTimestamp,
    lastOffsetDelta: records.length - 1,
  }
  if (opts.producerId !== undefined) {
    fields.producerId = Long.fromValue(opts.producerId)
    fields.producerEpoch = opts.producerEpoch
    fields.firstSequence = opts.firstSequence
  }
  const batch = await RecordBatch(fields)
  return batch.buffer
}

/* The record set a real Produce v3 request carries for the same messages. */
async function viaProduceRequest(messages, opts = {}) {
  const req = ProduceV3({
    acks: -1,
    timeout: 30000,
    compression: opts.compression || CompressionTypes.None,
    producerId: opts.producerId !== undefined ? Long.fromValue(opts.producerId) : undefined,
    producerEpoch: opts.producerEpoch,
    topicData: [
      { topic: 't', partitions: [{ partition: 0, firstSequence: opts.firstSequence, messages }] },
    ],
  })
  const buf = (await req.encode()).buffer
  let pos = 2 + 2 + 4 + 4 // null transactional id, acks, timeout, topic count
  pos += 2 + buf.readInt16BE(pos) // topic name
  pos += 4 + 4 // partition count, partition
  const size = buf.readInt32BE(pos)
  return buf.subarray(pos + 4, pos + 4 + size)
}

const str = v => (v === null || v === undefined ? null : Buffer.from(v).toString())

/* Decodes every batch of buf with kafkajs's decoder and compares with recs. */
async function checkWithDecoder(buf, recs, name) {
  const d = new Decoder(buf)
  const got = []
  while (d.canReadInt64()) {
    const b = await decodeBatch(d)
    for (const r of b.records)
      got.push({
        timestamp: Number(r.timestamp),
        key: str(r.key),
        value: str(r.value),
        headers: Object.entries(r.headers).flatMap(([k, v]) =>
          (Array.isArray(v) ? v : [v]).map(x => ({ name: k, value: str(x) }))
        ),
      })
  }
  const want = recs.map(r => ({ timestamp: r.timestamp, key: r.key, value: r.value, headers: r.headers }))
  if (JSON.stringify(got) !== JSON.stringify(want))
    throw new Error(`${name}: kafkajs decodes ${JSON.stringify(got)}, manifest says ${JSON.stringify(want)}`)
}

/* Manifest form of a kafkajs message. */
function manifestRecord(m, batch, index) {
  const headers = Object.entries(m.headers || {}).flatMap(([k, v]) =>
    (Array.isArray(v) ? v : [v]).map(x => ({ name: k, value: str(x) }))
  )
  return { batch, index, timestamp: Number(m.timestamp), key: str(m.key), value: str(m.value), headers }
}

/* ---- the files ------------------------------------------------------------- */

const T0 = 1700000000000 // 2023-11-14: inside every default timestamp window
const ts = ms => String(ms) // kafkajs messages carry string timestamps

function compressible(n) {
  const out = []
  for (let i = 0; i < n; i++) {
    const m = {
      key: i === 3 ? null : `c-${String(i).padStart(2, '0')}`,
      value: i === 7 ? null : `compressible value ${i} `.repeat(4),
      timestamp: ts(T0 + 100000 + i),
    }
    if (i === 11) m.headers = { codec: 'kept', n: String(i) }
    out.push(m)
  }
  return out
}

const C = CompressionTypes
const specs = [
  {
    file: 'plain.bin',
    description: '5 records, string keys and values, no headers, uncompressed',
    batches: [
      {
        messages: [0, 1, 2, 3, 4].map(i => ({
          key: `plain-k${i}`,
          value: `plain value ${i}`,
          timestamp: ts(T0 + i * 10),
        })),
      },
    ],
  },
  {
    file: 'headers.bin',
    description: '3 records with headers: several per record, a repeated name, an empty value',
    batches: [
      {
        messages: [
          { key: 'h-0', value: 'with headers', timestamp: ts(T0 + 1000), headers: { 'trace-id': 'abc123', source: 'kafkajs' } },
          { key: 'h-1', value: 'repeated header', timestamp: ts(T0 + 1001), headers: { multi: ['one', 'two'], empty: '' } },
          { key: 'h-2', value: 'no headers', timestamp: ts(T0 + 1002) },
        ],
      },
    ],
  },
  {
    file: 'nullkeys.bin',
    description: '4 records: three null keys (keyLength -1) and one empty key',
    batches: [
      {
        messages: [
          { key: null, value: 'nk-0', timestamp: ts(T0 + 2000) },
          { key: null, value: 'nk-1', timestamp: ts(T0 + 2001) },
          { key: '', value: 'empty key', timestamp: ts(T0 + 2002) },
          { key: null, value: 'nk-3', timestamp: ts(T0 + 2003) },
        ],
      },
    ],
  },
  {
    file: 'tombstones.bin',
    description: '3 records: two tombstones (valueLength -1, one with a header) around a live value',
    batches: [
      {
        messages: [
          { key: 't-0', value: null, timestamp: ts(T0 + 3000) },
          { key: 't-1', value: 'alive', timestamp: ts(T0 + 3001) },
          { key: 't-2', value: null, timestamp: ts(T0 + 3002), headers: { why: 'deleted' } },
        ],
      },
    ],
  },
  {
    file: 'multi.bin',
    description: 'three batches in one body: 2 records uncompressed, 3 gzip, 1 uncompressed',
    batches: [
      { messages: [0, 1].map(i => ({ key: `m-a${i}`, value: `first batch ${i}`, timestamp: ts(T0 + 4000 + i) })) },
      {
        compression: C.GZIP,
        messages: [0, 1, 2].map(i => ({ key: `m-b${i}`, value: `second batch ${i}`, timestamp: ts(T0 + 4100 + i) })),
      },
      { messages: [{ key: 'm-c0', value: 'third batch 0', timestamp: ts(T0 + 4200) }] },
    ],
  },
  ...[C.GZIP, C.Snappy, C.LZ4, C.ZSTD].map(codec => ({
    file: `${CODEC_NAMES[codec]}.bin`,
    codec,
    description: `20 compressible records (one null key, one tombstone, one with headers), ${CODEC_NAMES[codec]}`,
    batches: [{ compression: codec, messages: compressible(20) }],
  })),
  {
    file: 'logappend.bin',
    description:
      'LogAppendTime candidate: 3 records with out-of-order timestamps (kafkajs: firstTimestamp = min, maxTimestamp = max)',
    batches: [
      {
        messages: [
          { key: 'la-0', value: 'second oldest', timestamp: ts(T0 + 5500) },
          { key: 'la-1', value: 'oldest', timestamp: ts(T0 + 5100) },
          { key: 'la-2', value: 'newest', timestamp: ts(T0 + 5900) },
        ],
      },
    ],
  },
  {
    file: 'future.bin',
    description: 'one record stamped 2100-01-01, for message.timestamp.after.max.ms',
    batches: [{ messages: [{ key: 'future', value: 'from 2100', timestamp: ts(4102444800000) }] }],
  },
  {
    file: 'idempotent.bin',
    description: 'an idempotent producer batch: producerId 4242, producerEpoch 1, baseSequence 17',
    batches: [
      {
        producerId: 4242,
        producerEpoch: 1,
        firstSequence: 17,
        messages: [
          { key: 'i-0', value: 'idempotent 0', timestamp: ts(T0 + 6000) },
          { key: 'i-1', value: 'idempotent 1', timestamp: ts(T0 + 6001) },
        ],
      },
    ],
  },
]

/* The manifest as JSON with one batch or record a line, to stay readable. */
function render(manifest) {
  const { files, ...head } = manifest
  const list = (items, indent) => items.map(x => `${indent}${JSON.stringify(x)}`).join(',\n')
  const fileText = files.map(f => {
    const { batches, records, ...rest } = f
    const fields = Object.entries(rest).map(([k, v]) => `    ${JSON.stringify(k)}: ${JSON.stringify(v)}`)
    fields.push(`    "batches": [\n${list(batches, '      ')}\n    ]`)
    fields.push(`    "records": [\n${list(records, '      ')}\n    ]`)
    return `  {\n${fields.join(',\n')}\n  }`
  })
  const headText = JSON.stringify(head, null, 1).slice(0, -2)
  return `${headText},\n "files": [\n${fileText.join(',\n')}\n ]\n}\n`
}

async function main() {
  const manifest = {
    generator: 'tests/data/kafkajs/gen.js',
    kafkajs: require('kafkajs/package.json').version,
    node: process.version,
    plugins,
    skipped,
    files: [],
  }
  for (const spec of specs) {
    if (spec.codec && skipped[CODEC_NAMES[spec.codec]]) continue
    const parts = []
    const batches = []
    const records = []
    for (const [bi, b] of spec.batches.entries()) {
      if (b.compression && skipped[CODEC_NAMES[b.compression]])
        throw new Error(`${spec.file} needs ${CODEC_NAMES[b.compression]}`)
      const bytes = await buildBatch(b.messages, b)
      const viaRequest = await viaProduceRequest(b.messages, b)
      if (!bytes.equals(viaRequest))
        throw new Error(`${spec.file} batch ${bi}: differs from the Produce v3 request's record set`)
      const sorted = b.messages.map(m => Number(m.timestamp))
      batches.push({
        codec: CODEC_NAMES[b.compression || 0],
        record_count: b.messages.length,
        size: bytes.length,
        first_timestamp: Number(bytes.readBigInt64BE(27)),
        max_timestamp: Number(bytes.readBigInt64BE(35)),
        producer_id: b.producerId !== undefined ? b.producerId : -1,
        producer_epoch: b.producerEpoch !== undefined ? b.producerEpoch : 0,
        base_sequence: b.firstSequence !== undefined ? b.firstSequence : 0,
        crc: bytes.readUInt32BE(17),
      })
      if (batches[bi].max_timestamp !== Math.max(...sorted))
        throw new Error(`${spec.file}: maxTimestamp is not the largest timestamp`)
      for (const m of b.messages) records.push(manifestRecord(m, bi, records.length))
      parts.push(bytes)
    }
    const body = Buffer.concat(parts)
    await checkWithDecoder(body, records, spec.file)
    fs.writeFileSync(path.join(outDir, spec.file), body)
    manifest.files.push({
      file: spec.file,
      description: spec.description,
      size: body.length,
      sha256: crypto.createHash('sha256').update(body).digest('hex'),
      record_count: records.length,
      batches,
      records,
    })
    console.log(`${spec.file}: ${batches.length} batch(es), ${records.length} records, ${body.length} bytes`)
  }
  fs.writeFileSync(path.join(outDir, 'MANIFEST.json'), render(manifest))
  for (const [codec, why] of Object.entries(skipped)) console.log(`skipped ${codec}: ${why}`)
}

main().catch(e => {
  console.error(e)
  process.exit(1)
})
