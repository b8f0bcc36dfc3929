// Message search: by key, by message id (an offset id, or a publisher's Nats-Msg-Id), by time
// range and by subject within a topic; every search is this page's URL, a link to share, and
// pages on with a cursor, without a cap.
import {h, fill, table, link, href, num, time, localInput, fromParam, copyButton} from './dom.js';
import {api} from './api.js';
import {searchForm, field} from './topics.js';

const modes = {
  key: 'by key, newest first',
  uniq_key: 'by Nats-Msg-Id, newest first',
  msg_id: 'by offset message id',
  time: 'by store time, oldest first',
};

export async function messages(main, params) {
  const p = params;
  const input = (name, label, attrs) => field(label, h('input', Object.assign({name, id: 'search-' + name, value: p[name] || ''}, attrs)));
  const form = searchForm('messages', [
    input('topic', 'Topic', {placeholder: 'orders_eu', autocomplete: 'off'}),
    input('key', 'Key', {placeholder: 'Rmq-Keys or Nats-Msg-Id'}),
    input('id', 'Message id', {placeholder: 'offset id or Nats-Msg-Id'}),
    input('subject', 'Subject', {placeholder: 'orders.eu.> (pattern)'}),
    field('From', h('input', {name: 'begin', id: 'search-begin', type: 'datetime-local', step: 0.001, value: localInput(fromParam(p.begin)), dataset: {iso: '1'}})),
    field('To', h('input', {name: 'end', id: 'search-end', type: 'datetime-local', step: 0.001, value: localInput(fromParam(p.end)), dataset: {iso: '1'}})),
  ]);
  const searching = p.topic || p.id;
  fill(main, h('h1', {}, 'Messages'), form,
    searching ? h('p', {}, 'Searching…') : h('p', {class: 'note'},
      'Give a topic and a key, a message id, a subject or a time range. Every search is a link: its URL can be shared.'));
  if (!searching) return;
  const q = {topic: p.topic, key: p.key, id: p.id, subject: p.subject, begin: p.begin, end: p.end, cursor: p.cursor, limit: p.limit};
  const res = await api('messages', q);
  const rows = res.messages.map((m) => ({
    attrs: {dataset: {msgId: m.msg_id}},
    cells: [link('message', {id: m.msg_id}, time(m.store_time)), m.topic, `${m.queue_id} / ${num(m.queue_offset)}`,
      m.subject || '–', m.keys || '–', h('span', {class: 'preview'}, m.preview || (m.body_size ? `(${num(m.body_size)} bytes, binary)` : '(empty)'))],
  }));
  const share = location.origin + href('messages', Object.assign({}, q, {cursor: undefined}));
  const shareEl = h('code', {id: 'share-link'}, share);
  fill(main, h('h1', {}, 'Messages'), form,
    h('p', {class: 'count', id: 'search-mode'}, `${modes[res.mode] || res.mode}: ${num(res.messages.length)} on this page`,
      p.cursor ? ' (a later page)' : ''),
    table('messages-table', ['Stored', 'Topic', 'Queue / offset', 'Subject', 'Keys', 'Body'], rows, 'No message found.'),
    h('nav', {class: 'pager'},
      p.cursor ? link('messages', Object.assign({}, q, {cursor: undefined}), '« first page') : null,
      res.next ? link('messages', Object.assign({}, q, {cursor: res.next}), 'next page »') : null),
    h('p', {class: 'share'}, 'Link to this search: ', shareEl, ' ', copyButton(share, shareEl)));
}
