// One message: its fields and properties, its body as text, JSON or bytes, and a `nats pub`
// command that publishes it again.
import {h, fill, kv, table, link, num, time, bytes, copyButton, errorBox} from './dom.js';
import {api} from './api.js';

const hexLimit = 64 << 10;

export async function message(main, params) {
  let m;
  try {
    m = await api('message', {id: params.id});
  } catch (err) {
    fill(main, h('h1', {}, 'Message ', h('code', {}, params.id || '')), errorBox(err));
    return;
  }
  const raw = Uint8Array.from(atob(m.body), (c) => c.charCodeAt(0));
  const views = {};
  if (m.text !== undefined) views.text = h('pre', {id: 'body-text', class: 'body'}, m.text);
  if (m.json !== undefined) views.json = h('pre', {id: 'body-json', class: 'body'}, m.json);
  views.hex = h('pre', {id: 'body-hex', class: 'body'}, hexDump(raw.subarray(0, hexLimit)),
    raw.length > hexLimit ? `\n… ${num(raw.length - hexLimit)} more bytes` : '');
  const tabs = h('div', {class: 'tabs', role: 'tablist'});
  const panel = h('div', {class: 'tab-panel'});
  const show = (name) => {
    fill(panel, views[name]);
    for (const b of tabs.children) b.setAttribute('aria-selected', String(b.dataset.tab === name));
  };
  for (const name of Object.keys(views)) {
    const b = h('button', {type: 'button', role: 'tab', dataset: {tab: name}, id: 'tab-' + name}, name === 'json' ? 'JSON' : name === 'hex' ? 'Hex' : 'Text');
    b.addEventListener('click', () => show(name));
    tabs.append(b);
  }
  show(m.json !== undefined ? 'json' : m.text !== undefined ? 'text' : 'hex');
  const cmd = h('pre', {id: 'nats-pub', class: 'cmd'}, m.nats_pub);
  fill(main,
    h('h1', {}, 'Message ', h('code', {id: 'message-id'}, m.msg_id)),
    kv([
      ['Topic', link('topic', {topic: m.topic}, m.topic)],
      ['Subject', m.subject || '–'],
      ['Queue / offset', `${m.queue_id} / ${num(m.queue_offset)}`],
      ['CommitLog offset', num(m.commitlog_offset)],
      ['Stored', time(m.store_time) + ' on ' + m.store_host],
      ['Born', time(m.born_time) + ' on ' + m.born_host],
      ['Keys', m.keys ? m.keys.split(' ').map((k) => [link('messages', {topic: m.topic, key: k}, k), ' ']) : '–'],
      ['Message id (UNIQ_KEY)', m.uniq_key || '–'],
      ['Tags', m.tags || '–'],
      ['Size', `${bytes(m.size)} (body ${bytes(m.body_size)})`],
    ]),
    h('h2', {}, 'Body'),
    m.truncated ? h('p', {class: 'note'}, `The first ${bytes(raw.length)} of ${bytes(m.body_size)}.`) : null,
    tabs, panel,
    h('p', {}, h('a', {href: '/console/api/message/body?id=' + encodeURIComponent(m.msg_id), download: m.msg_id + '.bin'}, 'Download the body')),
    h('h2', {}, 'Publish it again'),
    cmd, copyButton(m.nats_pub, cmd),
    h('h2', {}, 'Properties'),
    table('properties-table', ['Name', 'Value'], m.properties.map(([k, v]) => [h('code', {}, k), v])));
}

// hexDump is the classic 16 bytes a line: offset, hex, printable ASCII.
function hexDump(b) {
  const lines = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = b.subarray(i, i + 16);
    const hex = Array.from(row, (x) => x.toString(16).padStart(2, '0')).join(' ');
    const asc = Array.from(row, (x) => (x >= 32 && x < 127 ? String.fromCharCode(x) : '.')).join('');
    lines.push(i.toString(16).padStart(8, '0') + '  ' + hex.padEnd(48) + ' ' + asc);
  }
  return lines.join('\n');
}
