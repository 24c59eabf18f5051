// Runs an ONNX model with onnxruntime-node on .npy inputs and writes each output as .npy.
//
//   node tests/ref/ort_run.mjs MODEL.onnx --out DIR [--threads N] [--bench RUNS]
//        [--opt-level disabled|basic|extended|all] name=file.npy ...
//   node tests/ref/ort_run.mjs --jobs JOBS.json
//
// --jobs runs many models in one process (the conformance suite): JOBS.json is a list of
// {"model": FILE, "out": DIR, "feeds": {name: file.npy}}; each job prints "job <i> ok" or
// "job <i> error <message>" and a failing job does not stop the rest.
// --opt-level sets ORT's graph optimization level (default all; disabled evaluates a QDQ graph
// as written instead of fusing it into integer kernels).
// With --bench, runs the model RUNS times after 3 warm-up runs and prints
// "ort median_ms <ms> min_ms <ms>". Output files are named <output name>.npy (characters
// outside [A-Za-z0-9_.-] become '_', as kiln does).
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');

const kDescr = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array],
  '<u2': ['uint16', Uint16Array], '<u4': ['uint32', Uint32Array], '<u8': ['uint64', BigUint64Array],
  '<f2': ['float16', Uint16Array],
  '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not an .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim())
    .filter((s) => s.length).map(Number);
  const entry = kDescr[descr];
  if (!entry) throw new Error(`${file}: dtype ${descr} not supported`);
  const [type, Ctor] = entry;
  const dataStart = start + headerLen;
  const bytes = buf.subarray(dataStart);
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  let data = new Ctor(copy.buffer, 0, bytes.length / Ctor.BYTES_PER_ELEMENT);
  if (type === 'bool') data = Uint8Array.from(data, (v) => (v ? 1 : 0));
  return new ort.Tensor(type, type === 'bool' ? Array.from(data, (v) => v !== 0) : data, shape);
}

function writeNpy(file, tensor) {
  const names = { float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', int16: '<i2',
                  uint16: '<u2', uint32: '<u4', uint64: '<u8', float16: '<f2', int8: '|i1', uint8: '|u1',
                  bool: '|b1' };
  const descr = names[tensor.type];
  if (!descr) throw new Error(`output type ${tensor.type} not supported`);
  const dims = tensor.dims.map(String);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + dict.length + 1;
  dict += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(dict.length, 8);
  let data;
  if (tensor.type === 'bool') {
    data = Buffer.from(Uint8Array.from(tensor.data, (v) => (v ? 1 : 0)));
  } else {
    data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  }
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(dict, 'latin1'), data]));
}

const safe = (name) => name.replace(/[^A-Za-z0-9_.-]/g, '_').replace(/^\.|^$/, '_$&');

async function runJobs(file) {
  const jobs = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (let i = 0; i < jobs.length; ++i) {
    const job = jobs[i];
    try {
      const feeds = {};
      for (const [name, npy] of Object.entries(job.feeds)) feeds[name] = readNpy(npy);
      const session = await ort.InferenceSession.create(job.model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
      const results = await session.run(feeds);
      fs.mkdirSync(job.out, { recursive: true });
      for (const name of session.outputNames) writeNpy(path.join(job.out, `${safe(name)}.npy`), results[name]);
      await session.release();
      console.log(`job ${i} ok`);
    } catch (e) {
      console.log(`job ${i} error ${String(e.message).split('\n')[0]}`);
    }
  }
}

async function main() {
  const args = process.argv.slice(2);
  if (args[0] === '--jobs') return runJobs(args[1]);
  let model = null, out = null, threads = 1, bench = 0, optLevel = 'all';
  const feeds = {};
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a === '--out') out = args[++i];
    else if (a === '--threads') threads = Number(args[++i]);
    else if (a === '--bench') bench = Number(args[++i]);
    else if (a === '--opt-level') optLevel = args[++i];
    else if (a.includes('=')) {
      const eq = a.indexOf('=');
      feeds[a.slice(0, eq)] = readNpy(a.slice(eq + 1));
    } else model = a;
  }
  if (!model) throw new Error('usage: ort_run.mjs MODEL --out DIR [--threads N] name=file.npy ...');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: optLevel,
  });
  const results = await session.run(feeds);
  if (out) {
    fs.mkdirSync(out, { recursive: true });
    for (const name of session.outputNames) {
      writeNpy(path.join(out, `${safe(name)}.npy`), results[name]);
      console.log(`output ${safe(name)}`);
    }
  }
  if (bench > 0) {
    for (let i = 0; i < 3; ++i) await session.run(feeds);
    const times = [];
    for (let i = 0; i < bench; ++i) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    times.sort((x, y) => x - y);
    console.log(`ort median_ms ${times[Math.floor(times.length / 2)].toFixed(3)} min_ms ${times[0].toFixed(3)}`);
  }
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
