// prom-client's series key (lib/util.js), which metric-batch.ts folds histogram buckets under.
declare module 'prom-client/lib/util.js' {
  const util: { hashObject(labels: object, labelNames?: readonly string[]): string };
  export default util;
}
