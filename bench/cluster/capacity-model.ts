/**
 * How many processes and NATS servers a target accepted rate needs, from the rates one
 * process of each kind reached in the benchmark, and which limit a single signal stream
 * or a single ClickHouse table meets first. Rates are per process on the machine
 * measured; a process on a bigger machine scales with its cores only as far as the
 * figures per core say.
 */

export interface MeasuredRates {
  /** Accepted signals/s of one NATS-backed gateway process. */
  readonly gatewayPerProcess: number
  /** Receipts/s one recorder process can write (from its CPU per receipt at the peak: one core's worth). */
  readonly recorderPerProcess: number
  /** Events/s one delivery process sends to SSE streams (from its CPU per event: one core's worth). */
  readonly deliveryEventsPerProcess: number
  /** Signals/s the busiest NATS server (the signal stream's leader) can take: one core's worth at its CPU per signal. */
  readonly streamLeaderPerCore: number
  /** NATS memory per signal held in the dedup windows, bytes (RSS growth per accepted signal, summed over the servers, per replica). */
  readonly natsBytesPerSignalHeld: number
  /** ClickHouse insert CPU per receipt, µs (the recorder's engine time for one receipt). */
  readonly clickhouseInsertUsPerReceipt: number
}

export interface ModelAssumptions {
  /** Events each accepted signal fans out to (streams per source). */
  readonly fanOut: number
  /** How long signals stay in the dedup state (the signal index, DEDUP_WINDOW_S). */
  readonly dedupWindowS: number
  /** Replicas of each stream (NATS_REPLICAS). */
  readonly replicas: number
  /** Memory a NATS server may give to dedup state, bytes. */
  readonly natsMemoryBytes: number
  /** Cores of a ClickHouse server given to inserts. */
  readonly clickhouseInsertCores: number
}

export interface Plan {
  readonly targetPerS: number
  readonly gateways: number
  readonly recorders: number
  readonly delivery: number
  readonly natsServers: number
  /** Signal streams (partitions of the log by source) so that no stream leader passes its rate. */
  readonly signalStreams: number
  readonly dedupBytesPerServer: number
  readonly clickhouseInsertCores: number
  /** The limits the target meets, most binding first (ratio of need to one unit's capacity). */
  readonly bounds: readonly { readonly what: string; readonly ratio: number }[]
}

export function plan(target: number, m: MeasuredRates, a: ModelAssumptions): Plan {
  const gateways = Math.ceil(target / m.gatewayPerProcess)
  // One active recorder per durable consumer: more recorders need the log split into as
  // many streams (partitions by source), each with its own recorder.
  const recorders = Math.ceil(target / m.recorderPerProcess)
  const delivery = Math.ceil((target * a.fanOut) / m.deliveryEventsPerProcess)
  const signalStreams = Math.max(Math.ceil(target / m.streamLeaderPerCore), recorders)
  // Every replica of a stream holds the whole of its dedup state.
  const dedupPerStreamReplica = (target / signalStreams) * a.dedupWindowS * m.natsBytesPerSignalHeld
  const streamsPerServer = Math.max(1, Math.floor(a.natsMemoryBytes / dedupPerStreamReplica))
  const natsServers = Math.max(3, a.replicas, Math.ceil((signalStreams * a.replicas) / streamsPerServer))
  const insertCores = (target * m.clickhouseInsertUsPerReceipt) / 1e6
  const bounds = [
    { what: "one signal stream's leader (a single, unpartitioned log)", ratio: target / m.streamLeaderPerCore },
    { what: "dedup memory of one stream's replica (a single, unpartitioned log)", ratio: (target * a.dedupWindowS * m.natsBytesPerSignalHeld) / a.natsMemoryBytes },
    { what: 'one ClickHouse server inserting', ratio: insertCores / a.clickhouseInsertCores },
    { what: 'one recorder (one durable consumer)', ratio: target / m.recorderPerProcess },
  ].sort((x, y) => y.ratio - x.ratio)
  return {
    targetPerS: target,
    gateways,
    recorders,
    delivery,
    natsServers,
    signalStreams,
    dedupBytesPerServer: (dedupPerStreamReplica * signalStreams * a.replicas) / natsServers,
    clickhouseInsertCores: insertCores,
    bounds,
  }
}
