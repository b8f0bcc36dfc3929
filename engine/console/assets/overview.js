// Overview: readiness and why, the store, the disk and its retention thresholds, flushes, and
// live charts of the last minutes (the server keeps them: a chart has its history at once).
import {h, fill, card, kv, bytes, num, rate, link, errorBox} from './dom.js';
import {api} from './api.js';
import {Chart} from './chart.js';

export async function overview(main) {
  const status = h('div', {id: 'overview-status', class: 'cards'});
  const charts = [
    new Chart({title: 'Messages stored /s', color: '#2f6fde', format: (v) => rate(v, 'msg/s')}),
    new Chart({title: 'Bytes stored /s', color: '#7a4fd6', format: (v) => bytes(v) + '/s'}),
    new Chart({title: 'Read API requests /s', color: '#138a5b', format: (v) => rate(v, 'req/s')}),
    new Chart({title: 'Dropped and refused /s', color: '#d2452f', format: (v) => rate(v, 'msg/s')}),
    new Chart({title: 'CommitLog sync (mean ms)', color: '#b7791f', format: (v) => v.toFixed(2) + ' ms'}),
  ];
  const series = [
    (p) => p.messages, (p) => p.bytes, (p) => p.reads, (p) => p.dropped + p.refused, (p) => p.sync_ms,
  ];
  const ids = ['chart-messages', 'chart-bytes', 'chart-reads', 'chart-drops', 'chart-sync'];
  charts.forEach((c, i) => (c.canvas.id = ids[i]));
  fill(main,
    h('h1', {}, 'Overview'),
    status,
    h('section', {class: 'card wide'}, h('h2', {}, 'Live: the last minutes (up to ten)'),
      h('div', {class: 'charts'}, charts.map((c) => c.el))));

  let since = 0;
  let stopped = false;
  const pollSamples = async () => {
    try {
      const s = await api('samples', {since});
      if (stopped) return;
      if (s.points.length) since = s.points[s.points.length - 1].t;
      charts.forEach((c, i) => c.add(s.points.map((p) => [p.t, series[i](p)])));
    } catch {
      // the next poll tries again
    }
  };
  const pollStatus = async () => {
    try {
      const o = await api('overview');
      if (!stopped) fill(status, statusCards(o));
    } catch (err) {
      if (!stopped) fill(status, errorBox(err));
    }
  };
  await Promise.all([pollSamples(), pollStatus()]);
  const t1 = setInterval(pollSamples, 1000);
  const t2 = setInterval(pollStatus, 2000);
  return () => {
    stopped = true;
    clearInterval(t1);
    clearInterval(t2);
    charts.forEach((c) => c.destroy());
  };
}

function statusCards(o) {
  const s = o.status || {};
  const ready = s.ready;
  const out = [];
  out.push(card('Engine',
    h('p', {id: 'readiness', class: ready ? 'badge ok' : 'badge bad'}, ready ? 'ready' : 'not ready: ' + (s.phase || '') + (s.reason ? ' — ' + s.reason : '')),
    kv([
      ['Phase', s.phase],
      ['Version', s.version],
      ['Up', s.uptime],
      ['Store', s.store_dir],
      ['Acks mean', s.flush_mode === 'sync' ? 'on disk (sync)' : s.flush_mode === 'async' ? 'in the page cache (async)' : s.flush_mode],
    ])));
  const off = s.offsets || {};
  const files = s.files || {};
  out.push(card('Store', kv([
    ['CommitLog kept', bytes((off.written || 0) - (off.min || 0))],
    ['Segments', num(files.commitlog_segments)],
    ['Topics', h('a', {href: '/console/topics'}, num(o.topics))],
    ['Queues', num(o.queues)],
    ['Index files', num(files.index_files)],
    ['Dispatch lag', bytes((s.lags || {}).dispatch_bytes)],
    ['Flush lag', bytes((s.lags || {}).flush_bytes)],
  ])));
  const d = s.disk;
  if (d) {
    const used = d.used_ratio;
    const bar = h('div', {class: 'diskbar', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': 1, 'aria-valuenow': used},
      h('div', {class: 'used' + (used >= d.refuse_above_ratio ? ' full' : used >= d.clean_any_hour_above_ratio ? ' warn' : ''),
        style: {width: `${Math.max(0, Math.min(1, used)) * 100}%`}}),
      [['clean', d.clean_any_hour_above_ratio], ['force', d.clean_forcibly_above_ratio], ['refuse', d.refuse_above_ratio]].map(
        ([n, r]) => h('span', {class: 'mark', style: {left: `${r * 100}%`}, title: `${n} above ${Math.round(r * 100)}%`})));
    const r = s.retention || {};
    out.push(card('Disk and retention',
      bar,
      kv([
        ['Used', used < 0 ? 'unknown' : Math.round(used * 100) + '%'],
        ['Free', bytes(d.free_bytes) + ' of ' + bytes(d.total_bytes)],
        ['Writes', d.refusing_writes ? 'refused: disk full' : 'taken'],
        ['Thresholds', `expired deleted at any hour above ${pct(d.clean_any_hour_above_ratio)}, oldest deleted above ${pct(d.clean_forcibly_above_ratio)}, writes refused above ${pct(d.refuse_above_ratio)}`],
        ['Retention', r.enabled ? `${r.file_reserved_time}, deleted at ${r.delete_when} h` : 'off'],
        ['Deleted', `${num(r.segments_deleted)} segments (${bytes(r.bytes_deleted)})`],
      ])));
  }
  const sy = s.sync || {};
  const c = s.counters || {};
  out.push(card('Flush', kv([
    ['Syncs', num(sy.count)],
    ['Mean sync', sy.mean_seconds !== undefined ? (sy.mean_seconds * 1000).toFixed(2) + ' ms' : '–'],
    ['Slow sync warned at', sy.slow_sync_warn_at],
    ['Records', num(c.records)],
    ['Syncs per record', c.syncs_per_record !== undefined ? c.syncs_per_record.toFixed(4) : '–'],
    ['Duplicates dropped', num(c.duplicates)],
  ])));
  const i = s.ingress;
  if (i) {
    const sum = (m) => Object.values(m || {}).reduce((a, b) => a + b, 0);
    out.push(card('Ingress', kv([
      ['Received', num(i.received)],
      ['Refused (invalid, too large)', num(sum(i.rejected))],
      ['Not stored (store errors)', num(sum(i.failed))],
      ['Dropped (slow consumer)', num(i.dropped)],
      ['Topics by the rule', i.max_topics < 0 ? num(i.rule_topics) + ' (no limit)' : `${num(i.rule_topics)} of ${num(i.max_topics)}`],
      ['Sent to _overflow', num(i.overflow_routes)],
    ])));
  }
  const g = s.groups;
  if (g) {
    out.push(card('Consumer groups', kv([
      ['With members', link('groups', {}, num(g.groups))],
      ['Members', num(g.members)],
      ['Rebalances under way', num(g.rebalances_under_way)],
      ['Redelivered', num(g.redelivered)],
    ])));
  }
  return out;
}

function pct(r) {
  return Math.round(r * 100) + '%';
}

