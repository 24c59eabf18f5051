// node bench/ort_session.mjs MODEL.onnx [RUNS] [THREADS]: the time onnxruntime-node takes to
// create an InferenceSession for the model (read, optimise, ready to run), median and min over
// RUNS (default 20), printed as "ort session median_ms <ms> min_ms <ms>".
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');
const [model, runsArg, threadsArg] = process.argv.slice(2);
const runs = Math.max(1, Number(runsArg || 20));
const threads = Math.max(1, Number(threadsArg || 1));
const ms = [];
for (let i = 0; i < runs; ++i) {
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: threads, interOpNumThreads: 1 });
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  await session.release();
}
ms.sort((a, b) => a - b);
console.log(`ort session median_ms ${ms[Math.floor(ms.length / 2)].toFixed(3)} min_ms ${ms[0].toFixed(3)}`);
