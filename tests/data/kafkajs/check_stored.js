#!/usr/bin/env node
/*
 * check_stored.js - reads back the record batches a running logstore stored
 * and decodes them with kafkajs 2.2.4's own decoder: the reverse of gen.js.
 *
 * gen.js proves logstore reads what kafkajs writes.  This proves kafkajs
 * reads what logstore writes: batches logstore encoded itself (JSON appends),
 * recompressed (binary appends of the kafkajs files into topics whose
 * compression.type differs), stamped (LogAppendTime) and rewritten by the
 * log cleaner.  Every batch is fetched twice where it can be - the raw read
 * (Accept: application/octet-stream, the stored bytes) and the segment .log
 * files in the data directory - and decoded by
 *
 *   - kafkajs/src/protocol/requests/fetch/v4/decodeMessages, the consumer's
 *     path through a Fetch response's record set, and
 *   - kafkajs/src/protocol/recordBatch/v0/decoder, one batch at a time,
 *
 * with the snappy, lz4 and zstd plugins registered as gen.js registers them.
 * kafkajs checks no CRC ("The library is currently not performing CRC
 * validations"), so the CRC-32C is checked here with kafkajs's own crc32C,
 * the one its encoder uses.  Every record is compared with what was sent and
 * with what logstore's JSON read answers; every batch header with what
 * Kafka's format requires (kafka-format.md): magic, CRC, codec, timestamp
 * type, base/max timestamp, lastOffsetDelta, producer fields, and that the
 * records fill the (decompressed) records section exactly.
 *
 * Usage (kafkajs and the plugins from a scratch install, see README.md):
 *   NODE_PATH=$scratch/node_modules node check_stored.js BASE_URL [DATA_DIR]
 * BASE_URL is the server (http://127.0.0.1:8080); DATA_DIR its log.dirs, to
 * read the segment files too.  Exit status 0 when every case passes, 1 if
 * any fails, 2 on a usage or connection error.
 */
'use strict'

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')

const { CompressionTypes, CompressionCodecs } = require('kafkajs')
const decodeBatch = require('kafkajs/src/protocol/recordBatch/v0/decoder')
const decodeMessages = require('kafkajs/src/protocol/requests/fetch/v4/decodeMessages')
const Decoder = require('kafkajs/src/protocol/decoder')
const crc32C = require('kafkajs/src/protocol/recordBatch/crc32C')
const TimestampTypes = require('kafkajs/src/protocol/timestampTypes')

CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
CompressionCodecs[CompressionTypes.LZ4] = new (require('kafkajs-lz4'))().codec
CompressionCodecs[CompressionTypes.ZSTD] = require('@kafkajs/zstd')()

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd']
/* compression.type -> the codec logstore must store a batch with (null: the batch's own) */
const TARGETS = { producer: null, uncompressed: 'none', gzip: 'gzip', snappy: 'snappy', lz4: 'lz4', zstd: 'zstd' }
const VECTORS = __dirname
const T0 = 1700000000000

const args = process.argv.slice(2)
if (args.length < 1 || args.length > 2 || !/^https?:\/\//.test(args[0])) {
  console.error('usage: node check_stored.js BASE_URL [DATA_DIR]')
  process.exit(2)
}
const BASE = args[0].replace(/\/$/, '')
const DATA_DIR = args[1] || null
const RUN = crypto.randomBytes(3).toString('hex') // fresh topic names on every run

/* ---- HTTP ------------------------------------------------------------------ */

async function http(method, url, body, headers = {}) {
  const init = { method, headers: { ...headers } }
  if (body !== undefined) {
    if (Buffer.isBuffer(body)) {
      init.body = body
      init.headers['Content-Type'] = 'application/octet-stream'
    } else {
      init.body = JSON.stringify(body)
      init.headers['Content-Type'] = 'application/json'
    }
  }
  const r = await fetch(BASE + url, init)
  const buf = Buffer.from(await r.arrayBuffer())
  return { status: r.status, headers: r.headers, buf }
}

async function json(method, url, body, want = [200, 201]) {
  const r = await http(method, url, body)
  const text = r.buf.toString()
  if (!want.includes(r.status)) throw new Error(`${method} ${url}: ${r.status} ${text.slice(0, 300)}`)
  return text ? JSON.parse(text) : null
}

const part = t => `/v1/topics/${t}/partitions/0`

async function createTopic(name, configs) {
  await json('POST', '/v1/topics', { name, partitions: 1, configs })
  return name
}

/* Every stored byte from the log start, through raw reads. */
async function rawAll(t) {
  const parts = []
  let offset = 0
  for (;;) {
    const r = await http('GET', `${part(t)}/records?offset=${offset}&max_bytes=1048576`, undefined, {
      Accept: 'application/octet-stream',
    })
    if (r.status !== 200) throw new Error(`raw read of ${t} at ${offset}: ${r.status} ${r.buf}`)
    const next = Number(r.headers.get('x-next-offset'))
    const hw = Number(r.headers.get('x-high-watermark'))
    if (offset === 0) offset = Number(r.headers.get('x-log-start-offset'))
    parts.push(r.buf)
    if (next >= hw || r.buf.length === 0) break
    offset = next
  }
  return Buffer.concat(parts)
}

/* Every record through the JSON read API, bytes as base64. */
async function jsonAll(t) {
  const out = []
  let offset = 0
  for (;;) {
    const r = await json('GET', `${part(t)}/records?offset=${offset}&max_records=1000&encoding=base64`)
    out.push(...r.records)
    if (r.next_offset >= r.high_watermark || r.records.length === 0) break
    offset = r.next_offset
  }
  return out.map(r => ({
    offset: r.offset,
    timestamp: r.timestamp,
    timestampType: r.timestamp_type,
    key: r.key === null ? null : Buffer.from(r.key, 'base64'),
    value: r.value === null ? null : Buffer.from(r.value, 'base64'),
    headers: r.headers.map(h => ({ name: h.name, value: h.value === null ? null : Buffer.from(h.value, 'base64') })),
  }))
}

/* The partition's segment files, oldest first, as they are on disk. */
function diskAll(t) {
  const dir = path.join(DATA_DIR, `${t}-0`)
  const logs = fs.readdirSync(dir).filter(f => /^\d{20}\.log$/.test(f)).sort()
  return Buffer.concat(logs.map(f => fs.readFileSync(path.join(dir, f))))
}

/* ---- what was sent --------------------------------------------------------- */

const b64 = v => (v === null || v === undefined ? v : Buffer.from(v).toString('base64'))
const bytes = v => (v === null || v === undefined ? null : Buffer.from(v))

/* A JSON append of recs = [{key, value, headers, timestamp}] holding Buffers
 * or null (key undefined: left out, which is null).  Returns the expectation
 * of every record and of its batch. */
async function appendJson(t, recs, batchExpect, keyed = false) {
  const body = {
    encoding: 'base64',
    records: recs.map(r => {
      const o = { value: b64(r.value) }
      if (r.key !== undefined) o.key = b64(r.key)
      if (r.timestamp !== undefined) o.timestamp = r.timestamp
      if (r.headers) o.headers = r.headers.map(h => ({ name: h.name, value: b64(h.value) }))
      return o
    }),
  }
  const before = Date.now()
  /* keyed: through the topic's URL (Kafka's partitioner; one partition here). */
  let a = await json('POST', keyed ? `/v1/topics/${t}/records` : `${part(t)}/records`, body)
  if (keyed) a = a.results[0]
  const after = Date.now()
  const batch = { ...batchExpect, records: recs.length, producerId: -1, producerEpoch: -1, baseSequence: -1 }
  if (a.log_append_time !== -1) batch.logAppendTime = a.log_append_time
  return recs.map((r, i) => ({
    offset: a.base_offset + i,
    timestamp: r.timestamp !== undefined ? r.timestamp : { between: [before, after] },
    key: bytes(r.key),
    value: bytes(r.value),
    headers: (r.headers || []).map(h => ({ name: h.name, value: bytes(h.value) })),
    batch,
    batchIndex: i,
  }))
}

const manifest = JSON.parse(fs.readFileSync(path.join(VECTORS, 'MANIFEST.json')))

/* A binary append of one of the committed kafkajs files. */
async function appendFile(t, file, target, lat) {
  const m = manifest.files.find(f => f.file === file)
  if (!m) return null // its codec was skipped when the files were made
  const body = fs.readFileSync(path.join(VECTORS, file))
  const a = await json('POST', `${part(t)}/records`, body)
  const out = []
  let offset = a.base_offset
  let pos = 0
  for (const [bi, b] of m.batches.entries()) {
    const batch = {
      codec: target || b.codec,
      sourceCodec: b.codec,
      records: b.record_count,
      producerId: b.producer_id,
      producerEpoch: b.producer_epoch,
      baseSequence: b.base_sequence,
    }
    /* A batch in its own codec is stored as sent, as a Kafka broker stores
     * it: only baseOffset (and, with LogAppendTime, the stamp) change. */
    if (batch.codec === b.codec && !lat) batch.sentBytes = body.subarray(pos, pos + b.size)
    pos += b.size
    if (lat) batch.logAppendTime = a.log_append_time
    for (const [i, r] of m.records.filter(x => x.batch === bi).entries())
      out.push({
        offset: offset + i,
        timestamp: r.timestamp,
        key: bytes(r.key),
        value: bytes(r.value),
        headers: r.headers.map(h => ({ name: h.name, value: bytes(h.value) })),
        batch,
        batchIndex: i,
      })
    offset += b.record_count
  }
  return out
}

/* ---- decoding and comparing -------------------------------------------------- */

const show = v => (v === null ? 'null' : Buffer.isBuffer(v) ? JSON.stringify(v.length > 40 ? v.subarray(0, 40).toString('latin1') + '…' : v.toString('latin1')) : JSON.stringify(v))
const same = (a, b) => (a === null || b === null ? a === b : Buffer.compare(a, b) === 0)

/* kafkajs's header object (a repeated name becomes an array) as an ordered list of one entry per name. */
function kafkajsHeaders(list) {
  return list.reduce((obj, { name, value }) => {
    obj[name] = obj[name] === undefined ? value : Array.isArray(obj[name]) ? obj[name].concat([value]) : [obj[name], value]
    return obj
  }, {})
}

function sameHeaders(got, want) {
  const w = kafkajsHeaders(want)
  const gk = Object.keys(got)
  if (JSON.stringify(gk) !== JSON.stringify(Object.keys(w))) return false
  return gk.every(k => {
    const g = Array.isArray(got[k]) ? got[k] : [got[k]]
    const x = Array.isArray(w[k]) ? w[k] : [w[k]]
    return g.length === x.length && g.every((v, i) => same(v, x[i]))
  })
}

const showHeaders = h => JSON.stringify(Object.entries(h).map(([k, v]) => [k, (Array.isArray(v) ? v : [v]).map(x => (x === null ? null : x.toString('latin1')))]))

/* Splits buf into batches at their length fields and decodes each with
 * kafkajs, checking what kafkajs does not: CRC, magic, the records section. */
async function decodeAll(buf, fail) {
  const batches = []
  let pos = 0
  while (pos < buf.length) {
    if (buf.length - pos < 61) return fail(`${buf.length - pos} bytes at position ${pos} are no batch`)
    const size = 12 + buf.readInt32BE(pos + 8)
    if (size < 61 || pos + size > buf.length) return fail(`batch at position ${pos}: length ${size - 12} runs past the bytes`)
    const raw = buf.subarray(pos, pos + size)
    const b = await decodeBatch(new Decoder(raw))
    b.raw = raw
    b.position = pos
    b.magic = raw.readInt8(16)
    b.crcStored = raw.readUInt32BE(17)
    b.crcComputed = crc32C(raw.subarray(21))
    b.attributes = raw.readInt16BE(21)
    b.codec = CODECS[b.attributes & 7] || `codec ${b.attributes & 7}`
    b.recordCount = raw.readInt32BE(57)
    b.sectionError = await checkSection(raw, b)
    batches.push(b)
    pos += size
  }
  /* The consumer's own path: the record set as a Fetch response holds it. */
  const withSize = Buffer.alloc(4 + buf.length)
  withSize.writeInt32BE(buf.length)
  buf.copy(withSize, 4)
  const viaFetch = buf.length ? await decodeMessages(new Decoder(withSize)) : []
  const flat = batches.flatMap(b => b.records)
  if (viaFetch.length !== flat.length)
    fail(`kafkajs's Fetch decoder reads ${viaFetch.length} records, batch by batch ${flat.length}`)
  else
    viaFetch.forEach((r, i) => {
      if (r.offset !== flat[i].offset || !same(r.value, flat[i].value))
        fail(`kafkajs's Fetch decoder and the batch decoder disagree at record ${i} (offset ${r.offset})`)
    })
  return batches
}

/* The records section must hold exactly recordCount length-prefixed records:
 * kafkajs reads recordCount records and ignores anything after them. */
async function checkSection(raw, b) {
  let section = raw.subarray(61)
  if (b.attributes & 7) {
    const codec = CompressionCodecs[b.attributes & 7]
    if (!codec) return `no kafkajs codec for ${b.codec}`
    if (section.length === 0) return b.recordCount === 0 ? null : 'compressed records section is empty'
    section = await codec().decompress(section)
  }
  const d = new Decoder(section)
  for (let i = 0; i < b.recordCount; i++) d.readVarIntBytes()
  if (d.offset !== section.length) return `${section.length - d.offset} bytes follow the ${b.recordCount} records`
  return null
}

/* The codec's framing, against what README.md says logstore writes (Kafka's
 * Java client's framings).  kafkajs reads more than these; this is logstore's claim. */
function framingError(b) {
  const s = b.raw.subarray(61)
  if (b.recordCount === 0 && s.length === 0) return null
  if (b.codec === 'snappy') {
    const magic = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0])
    if (!s.subarray(0, 8).equals(magic) || s.readInt32BE(8) !== 1 || s.readInt32BE(12) !== 1)
      return 'snappy without the xerial header (magic, version 1, compatible 1)'
  }
  if (b.codec === 'lz4') {
    if (s.readUInt32LE(0) !== 0x184d2204) return 'lz4 without the frame magic'
    /* Kafka's KafkaLZ4BlockOutputStream: version 1, independent blocks, no
     * block or content checksum, no content size or dictionary, 64 KiB blocks. */
    const flg = s[4]
    if (flg !== 0x60 || s[5] !== 0x40)
      return `lz4 FLG ${flg.toString(16)} BD ${s[5].toString(16)}: not 60 40 (independent 64 KiB blocks, no checksums)`
  }
  if (b.codec === 'gzip' && (s[0] !== 0x1f || s[1] !== 0x8b)) return 'gzip without the gzip magic'
  if (b.codec === 'zstd' && s.readUInt32LE(0) !== 0xfd2fb528) return 'zstd without the frame magic'
  return null
}

const DELETE_HORIZON = 0x40

/* Compares the decoded batches with the JSON read and with what was sent. */
function compare(batches, jsonRecs, sent, opts, fail) {
  const byOffset = new Map(sent.map(s => [s.offset, s]))
  const kjs = []
  for (const b of batches) {
    const at = `batch at offset ${b.firstOffset}`
    if (b.magic !== 2) fail(`${at}: magic ${b.magic}`)
    if (b.crcStored !== b.crcComputed) fail(`${at}: CRC ${b.crcStored} stored, ${b.crcComputed} computed`)
    if (b.partitionLeaderEpoch !== 0) fail(`${at}: partitionLeaderEpoch ${b.partitionLeaderEpoch}`)
    if (b.inTransaction || b.isControlBatch) fail(`${at}: transactional or control bit set`)
    if (b.attributes & ~0x4f) fail(`${at}: attributes ${b.attributes} has unknown bits`)
    if (b.sectionError) fail(`${at}: ${b.sectionError}`)
    if (b.records.length !== b.recordCount) fail(`${at}: kafkajs decodes ${b.records.length} of ${b.recordCount} records`)
    if (!opts.compacted && b.lastOffsetDelta !== b.recordCount - 1)
      fail(`${at}: lastOffsetDelta ${b.lastOffsetDelta}, ${b.recordCount} records`)
    let prev = -1
    for (const r of b.records) {
      const off = Number(r.offset)
      const delta = off - Number(b.firstOffset)
      if (delta <= prev || delta > b.lastOffsetDelta) fail(`${at}: offset ${off} out of order or past lastOffsetDelta`)
      prev = delta
      if (r.attributes !== 0) fail(`offset ${off}: record attributes ${r.attributes}`)
    }
    const exp = b.records.length ? byOffset.get(Number(b.records[0].offset)) : null
    /* Batches logstore encoded (JSON appends, recompressions): Kafka's
     * framings and baseTimestamp rule.  Batches kept as sent keep kafkajs's. */
    const encodedHere = !exp || exp.batch.sourceCodec === undefined || exp.batch.codec !== exp.batch.sourceCodec
    const fe = encodedHere ? framingError(b) : null
    if (fe) fail(`${at}: ${fe}`)
    if (exp && exp.batch.sentBytes && !opts.compacted) {
      const sb = exp.batch.sentBytes
      if (!b.raw.subarray(8, 12).equals(sb.subarray(8, 12)) || !b.raw.subarray(16).equals(sb.subarray(16)))
        fail(`${at}: not stored as sent (${b.raw.length} bytes stored, ${sb.length} sent)`)
    }
    if (exp) {
      const e = exp.batch
      if (e.codec !== undefined && b.codec !== e.codec) fail(`${at}: codec ${b.codec}, expected ${e.codec}`)
      if (!opts.compacted && b.recordCount !== e.records) fail(`${at}: ${b.recordCount} records, ${e.records} were appended together`)
      if (Number(b.producerId) !== e.producerId || b.producerEpoch !== e.producerEpoch || b.firstSequence !== e.baseSequence)
        fail(`${at}: producer ${b.producerId}/${b.producerEpoch}/${b.firstSequence}, expected ${e.producerId}/${e.producerEpoch}/${e.baseSequence}`)
      const lat = e.logAppendTime !== undefined
      if ((b.timestampType === TimestampTypes.LOG_APPEND_TIME) !== lat) fail(`${at}: timestamp type ${b.timestampType}`)
      if (lat && Number(b.maxTimestamp) !== e.logAppendTime) fail(`${at}: maxTimestamp ${b.maxTimestamp}, log_append_time ${e.logAppendTime}`)
    }
    if (b.records.length && b.timestampType === TimestampTypes.CREATE_TIME) {
      const ts = b.records.map(r => Number(r.timestamp))
      if (Number(b.maxTimestamp) !== Math.max(...ts)) fail(`${at}: maxTimestamp ${b.maxTimestamp}, records' largest ${Math.max(...ts)}`)
      if (encodedHere && !(b.attributes & DELETE_HORIZON) && !opts.compacted && Number(b.firstTimestamp) !== ts[0])
        fail(`${at}: firstTimestamp ${b.firstTimestamp}, first record's ${ts[0]}`)
    }
    kjs.push(...b.records.map(r => ({ r, b })))
  }
  if (kjs.length !== jsonRecs.length) fail(`kafkajs decodes ${kjs.length} records, the JSON read answers ${jsonRecs.length}`)
  for (let i = 0; i < Math.min(kjs.length, jsonRecs.length); i++) {
    const { r, b } = kjs[i]
    const j = jsonRecs[i]
    const off = Number(r.offset)
    const at = `offset ${off}`
    if (off !== j.offset) { fail(`record ${i}: kafkajs offset ${off}, JSON ${j.offset}`); break }
    const type = b.timestampType === TimestampTypes.LOG_APPEND_TIME ? 'LogAppendTime' : 'CreateTime'
    if (Number(r.timestamp) !== j.timestamp || type !== j.timestampType)
      fail(`${at}: kafkajs timestamp ${r.timestamp} ${type}, JSON ${j.timestamp} ${j.timestampType}`)
    if (!same(r.key, j.key)) fail(`${at}: kafkajs key ${show(r.key)}, JSON ${show(j.key)}`)
    if (!same(r.value, j.value)) fail(`${at}: kafkajs value ${show(r.value)}, JSON ${show(j.value)}`)
    if (!sameHeaders(r.headers, j.headers)) fail(`${at}: kafkajs headers ${showHeaders(r.headers)}, JSON ${showHeaders(kafkajsHeaders(j.headers))}`)
    const s = byOffset.get(off)
    if (!s) { fail(`${at}: kafkajs decodes a record that was not sent or should be gone`); continue }
    if (!same(r.key, s.key)) fail(`${at}: key ${show(r.key)}, sent ${show(s.key)}`)
    if (!same(r.value, s.value)) fail(`${at}: value ${show(r.value)}, sent ${show(s.value)}`)
    if (!sameHeaders(r.headers, s.headers)) fail(`${at}: headers ${showHeaders(r.headers)}, sent ${showHeaders(kafkajsHeaders(s.headers))}`)
    const t = Number(r.timestamp)
    if (s.batch.logAppendTime !== undefined) {
      if (t !== s.batch.logAppendTime) fail(`${at}: timestamp ${t}, log_append_time ${s.batch.logAppendTime}`)
    } else if (typeof s.timestamp === 'number') {
      if (t !== s.timestamp) fail(`${at}: timestamp ${t}, sent ${s.timestamp}`)
    } else if (t < s.timestamp.between[0] || t > s.timestamp.between[1]) {
      fail(`${at}: timestamp ${t}, not the time of the append (${s.timestamp.between.join('..')})`)
    }
  }
  if (!opts.compacted)
    for (const s of sent) if (!kjs.some(k => Number(k.r.offset) === s.offset)) fail(`offset ${s.offset}: sent, not decoded`)
}

/* ---- the cases --------------------------------------------------------------- */

const results = []

async function check(name, topic, sent, opts = {}) {
  const fails = []
  const fail = msg => {
    if (fails.length < 20) fails.push(msg)
    else if (fails.length === 20) fails.push('…')
    return []
  }
  let info = ''
  try {
    const jsonRecs = await jsonAll(topic)
    const raw = await rawAll(topic)
    const batches = await decodeAll(raw, m => fail(`raw read: ${m}`))
    compare(batches, jsonRecs, sent, opts, m => fail(`raw read: ${m}`))
    const codecs = [...new Set(batches.map(b => b.codec + (b.attributes & DELETE_HORIZON ? '+horizon' : '')))].join(',')
    info = `${batches.length} batches (${codecs}), ${jsonRecs.length} records, ${raw.length} bytes`
    if (DATA_DIR) {
      const disk = diskAll(topic)
      if (!disk.equals(raw)) fail(`segment files (${disk.length} bytes) differ from the raw read (${raw.length})`)
      const db = await decodeAll(disk, m => fail(`segment files: ${m}`))
      compare(db, jsonRecs, sent, opts, m => fail(`segment files: ${m}`))
      info += ', segment files too'
    }
    if (opts.extra) await opts.extra(batches, fail)
  } catch (e) {
    fail(`error: ${e.stack || e}`)
  }
  results.push({ name, ok: fails.length === 0 })
  console.log(`${fails.length ? 'FAIL' : 'pass'}  ${name}: ${info}`)
  for (const f of fails) console.log(`        ${f}`)
}

const utf8 = s => Buffer.from(s, 'utf8')
const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i))

/* Records covering the JSON API's cases: null/empty keys and values, headers
 * (null and empty values, a repeated name, non-UTF-8 bytes), explicit and
 * default timestamps, out-of-order timestamps (negative deltas). */
function jsonCases() {
  return [
    [
      { key: utf8('k-0'), value: utf8('plain value'), timestamp: T0 + 500 },
      { value: utf8('no key (null)'), timestamp: T0 + 100 },
      { key: utf8(''), value: utf8('empty key'), timestamp: T0 + 900 },
      { key: utf8('k-3'), value: null, timestamp: T0 + 200 },
      { key: utf8('k-4'), value: utf8(''), timestamp: T0 + 300 },
      {
        key: utf8('k-5'),
        value: utf8('headers'),
        timestamp: T0 + 400,
        headers: [
          { name: 'trace-id', value: utf8('abc') },
          { name: 'null-value', value: null },
          { name: 'empty', value: utf8('') },
          { name: 'trace-id', value: utf8('again') },
          { name: 'ключ', value: utf8('значение ✓') },
        ],
      },
      { key: allBytes, value: Buffer.concat([allBytes, allBytes]), timestamp: T0 + 401, headers: [{ name: 'bin', value: allBytes }] },
    ],
    /* No timestamps: the server's clock. */
    [{ key: utf8('now-0'), value: utf8('stamped by the server') }, { key: utf8('now-1'), value: utf8('and again') }],
    /* Large values: several xerial snappy blocks (32 KiB) and LZ4 blocks
     * (64 KiB), incompressible bytes (LZ4 stores such blocks uncompressed). */
    [
      { key: utf8('big-text'), value: utf8('logstore kafkajs compatible '.repeat(6000)), timestamp: T0 + 1000 },
      { key: utf8('big-random'), value: crypto.randomBytes(150000), timestamp: T0 + 1001 },
    ],
    /* Timestamp deltas past 32 bits, both ways: 0, then 2023, then now. */
    [
      { key: utf8('epoch'), value: utf8('1970'), timestamp: 0 },
      { key: utf8('t0'), value: utf8('2023'), timestamp: T0 },
      { key: utf8('now'), value: utf8('the server clock') },
    ],
    /* Many records: offset deltas and lengths past one varint byte. */
    Array.from({ length: 300 }, (_, i) => ({
      key: utf8(`many-${i}`),
      value: utf8(`value ${i} `.repeat(i % 20)),
      timestamp: T0 + 2000 + ((i * 7919) % 300),
    })),
  ]
}

const BIN_FILES = ['plain.bin', 'headers.bin', 'nullkeys.bin', 'tombstones.bin', 'multi.bin', 'gzip.bin', 'snappy.bin', 'lz4.bin', 'zstd.bin', 'idempotent.bin', 'logappend.bin']

async function main() {
  try {
    await json('GET', '/health/ready')
  } catch (e) {
    console.error(`${BASE} is not ready: ${e.message}`)
    process.exit(2)
  }
  const codecs = Object.keys(TARGETS)

  /* 1. JSON appends, encoded (and compressed) by logstore. */
  for (const ct of codecs) {
    const t = await createTopic(`kjs-${RUN}-json-${ct}`, { 'compression.type': ct })
    const sent = []
    for (const recs of jsonCases()) sent.push(...(await appendJson(t, recs, { codec: TARGETS[ct] || 'none' })))
    sent.push(...(await appendJson(t, jsonCases()[0], { codec: TARGETS[ct] || 'none' }, true)))
    await check(`JSON appends, compression.type=${ct}`, t, sent)
  }

  /* 2. kafkajs's batches, recompressed to the topic's codec (or kept). */
  for (const ct of codecs) {
    const t = await createTopic(`kjs-${RUN}-bin-${ct}`, { 'compression.type': ct })
    const sent = []
    for (const f of BIN_FILES) {
      const got = await appendFile(t, f, TARGETS[ct], false)
      if (got) sent.push(...got)
    }
    await check(`kafkajs binary appends, compression.type=${ct}`, t, sent)
  }

  /* 3. LogAppendTime: the stamp in maxTimestamp, the attribute bit set. */
  for (const ct of codecs) {
    const t = await createTopic(`kjs-${RUN}-lat-${ct}`, { 'compression.type': ct, 'message.timestamp.type': 'LogAppendTime' })
    const sent = []
    sent.push(...(await appendJson(t, jsonCases()[0], { codec: TARGETS[ct] || 'none' })))
    for (const f of ['logappend.bin', 'gzip.bin', 'snappy.bin', 'lz4.bin', 'idempotent.bin']) {
      const got = await appendFile(t, f, TARGETS[ct], true)
      if (got) sent.push(...got)
    }
    await check(`LogAppendTime, compression.type=${ct}`, t, sent)
  }

  /* 4. Compaction: batches the cleaner rewrote (records dropped, offsets
   * kept, tombstones given a delete horizon, an idempotent producer's last
   * batch kept as an empty header). */
  for (const [ct, lat] of [...codecs.map(c => [c, false]), ['uncompressed', true], ['lz4', true]]) {
    const name = `compact-${ct}${lat ? '-lat' : ''}`
    const t = await createTopic(`kjs-${RUN}-${name}`, {
      'compression.type': ct,
      'cleanup.policy': 'compact',
      'min.cleanable.dirty.ratio': '0.01',
      'message.timestamp.type': lat ? 'LogAppendTime' : 'CreateTime',
    })
    const codec = TARGETS[ct] || 'none'
    const hdr = n => [{ name: 'rev', value: utf8(String(n)) }, { name: 'rev', value: null }]
    const sent = []
    sent.push(...(await appendJson(t, ['a', 'b', 'c', 'd'].map((k, i) => ({ key: utf8(k), value: utf8(`${k}1`), timestamp: T0 + i, headers: hdr(1) })), { codec })))
    for (const f of ['plain.bin', 'headers.bin', 'multi.bin', 'logappend.bin', 'idempotent.bin'])
      sent.push(...(await appendFile(t, f, TARGETS[ct], lat)))
    sent.push(...(await appendJson(t, [
      { key: utf8('a'), value: utf8('a2'), timestamp: T0 + 10, headers: hdr(2) },
      { key: utf8('b'), value: null, timestamp: T0 + 11 },
      { key: utf8('plain-k1'), value: utf8('plain again'), timestamp: T0 + 12 },
    ], { codec })))
    await json('POST', `${part(t)}/segments:roll`)
    sent.push(...(await appendJson(t, [
      { key: utf8('c'), value: utf8('c2'), timestamp: T0 + 20 },
      { key: utf8('i-0'), value: utf8('overwrites the idempotent batch'), timestamp: T0 + 21 },
      { key: utf8('i-1'), value: utf8('both of its records'), timestamp: T0 + 22 },
      { key: utf8('m-b1'), value: null, timestamp: T0 + 23 },
      { key: utf8('la-0'), value: utf8('leaves la-1 and la-2 in their batch'), timestamp: T0 + 24 },
    ], { codec })))
    await json('POST', `${part(t)}/segments:roll`)
    sent.push(...(await appendJson(t, [{ key: utf8('active'), value: utf8('in the active segment'), timestamp: T0 + 30 }], { codec })))
    const run = await json('POST', `/v1/topics/${t}/compaction:run`, {})
    /* What must survive: the last record of every key. */
    const last = new Map()
    for (const s of sent) last.set(s.key.toString('latin1'), s.offset)
    const kept = sent.filter(s => last.get(s.key.toString('latin1')) === s.offset)
    const removed = sent.length - kept.length
    await check(`compaction, compression.type=${ct}${lat ? ', LogAppendTime' : ''}`, t, kept, {
      compacted: true,
      extra: async (batches, fail) => {
        const r = JSON.stringify(run)
        if (!/"records_removed":\s*[1-9]/.test(r)) fail(`compaction:run removed nothing: ${r.slice(0, 300)}`)
        if (!batches.some(b => b.attributes & DELETE_HORIZON)) fail('no batch carries a delete horizon')
        const idem = batches.filter(b => Number(b.producerId) === 4242)
        if (idem.length !== 1 || idem[0].recordCount !== 0 || idem[0].lastOffsetDelta !== 1)
          fail(`the idempotent producer's batch is not kept as an empty header: ${JSON.stringify(idem.map(b => [b.recordCount, b.lastOffsetDelta]))}`)
        const json = await jsonAll(t)
        if (json.length !== sent.length - removed) fail(`JSON read answers ${json.length} records, ${sent.length - removed} expected`)
      },
    })
  }

  const failed = results.filter(r => !r.ok)
  console.log(`\n${results.length - failed.length} passed, ${failed.length} failed`)
  process.exit(failed.length ? 1 : 0)
}

main().catch(e => {
  console.error(e)
  process.exit(2)
})
