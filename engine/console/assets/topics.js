// Topics: a page at a time, searchable by name or subject; the routing in force (declared
// patterns, the topic limit, _overflow); one topic's queues, their offsets and retained span.
import {h, fill, card, kv, table, link, href, num, time, duration, errorBox} from './dom.js';
import {api, navigate} from './api.js';

// searchForm is a form that navigates to path with its fields as parameters.
export function searchForm(path, fields, submit) {
  const form = h('form', {class: 'search', role: 'search'}, fields, h('button', {type: 'submit'}, submit || 'Search'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const params = {};
    for (const el of form.elements) {
      if (el.name && el.value) params[el.name] = el.dataset.iso ? toISO(el.value) : el.value;
    }
    navigate(href(path, params));
  });
  return form;
}

// toISO turns a datetime-local value (local time) into an RFC 3339 time in UTC.
function toISO(v) {
  const t = new Date(v);
  return Number.isNaN(t.getTime()) ? v : t.toISOString();
}

export function field(label, input) {
  return h('label', {class: 'field'}, h('span', {}, label), input);
}

export async function topics(main, params) {
  const q = params.q || '';
  const res = await api('topics', {q, after: params.after, limit: params.limit});
  const rows = res.topics.map((t) => ({
    attrs: {dataset: {topic: t.name}},
    cells: [
      link('topic', {topic: t.name}, t.name),
      t.subject || (t.declared ? t.declared.join(', ') : '') || (t.overflow ? 'subjects past the topic limit' : ''),
      num(t.queues.length),
      num(t.messages),
      t.min_time ? `${time(t.min_time)} (${duration(Date.now() - t.min_time)})` : '–',
      num(t.last_minute),
      link('messages', {topic: t.name}, 'messages'),
    ],
  }));
  const first = params.after ? link('topics', {q}, '« first page') : null;
  const next = res.next ? link('topics', {q, after: res.next}, 'next page »') : null;
  fill(main,
    h('h1', {}, 'Topics'),
    searchForm('topics', [field('Name or subject contains', h('input', {name: 'q', value: q, type: 'search', id: 'topic-q'}))]),
    h('p', {class: 'count', id: 'topics-count'}, `${num(res.total)} topic${res.total === 1 ? '' : 's'}${q ? ' match' : ''}`,
      params.after ? `, after ${params.after}` : ''),
    table('topics-table', ['Topic', 'Subject', 'Queues', 'Messages kept', 'Kept since', 'Last minute', ''], rows, 'No topic.'),
    h('nav', {class: 'pager'}, first, next),
    res.routing ? routingCard(res.routing) : null);
}

function routingCard(r) {
  const limit = r.max_topics < 0 ? 'no limit' : `${num(r.rule_topics)} of ${num(r.max_topics)} made by the rule`;
  return card('Subjects to topics',
    kv([
      ['Subjects stored', r.subjects.join(', ')],
      ['Rule', r.topic_tokens > 0 ? `the first ${r.topic_tokens} tokens are the topic, the rest TAGS` : 'the whole subject is the topic (. as _)'],
      ['Topic limit', limit],
      ['Overflow', h('span', {}, `${num(r.overflowed)} subjects sent to `, link('topic', {topic: r.overflow_topic}, r.overflow_topic))],
      ['Queues per topic', num(r.queues_per_topic)],
    ]),
    h('h3', {}, 'Declared topics'),
    table('patterns-table', ['Subjects', 'Topic'], r.patterns.map((p) => [p.subjects, link('topic', {topic: p.topic}, p.topic)]),
      'None declared (--topics).'));
}

export async function topic(main, params) {
  const name = params.topic || '';
  let res;
  try {
    res = await api('topic', {topic: name});
  } catch (err) {
    fill(main, h('h1', {}, 'Topic ', h('code', {}, name)), errorBox(err));
    return;
  }
  const t = res.topic;
  const hourAgo = new Date(Date.now() - 3600e3).toISOString();
  fill(main,
    h('h1', {}, 'Topic ', h('code', {id: 'topic-name'}, t.name)),
    kv([
      t.subject ? ['Subject', t.subject] : null,
      t.declared ? ['Declared by', t.declared.join(', ')] : null,
      t.overflow ? ['Holds', 'the subjects past the topic limit, each with its own subject'] : null,
      ['Messages kept', num(t.messages)],
      ['Kept since', t.min_time ? `${time(t.min_time)} (${duration(Date.now() - t.min_time)} ago)` : '–'],
      ['Newest', time(t.max_time)],
      ['Stored in the last minute', num(t.last_minute)],
    ]),
    h('p', {class: 'actions'},
      link('messages', {topic: t.name}, 'All messages'), ' · ',
      link('messages', {topic: t.name, begin: hourAgo}, 'The last hour'), ' · ',
      link('groups', {q: t.name}, 'Its groups')),
    h('h2', {}, 'Queues'),
    table('queues-table', ['Queue', 'Min offset', 'Max offset', 'Messages', 'Oldest kept', 'Newest', 'Last minute'],
      t.queues.map((q) => [num(q.queue_id), num(q.min_offset), num(q.max_offset), num(q.max_offset - q.min_offset),
        time(q.min_time), time(q.max_time), num(q.last_minute)])),
    h('h2', {}, 'Consumer groups'),
    res.groups.length ? h('ul', {id: 'topic-groups'}, res.groups.map((g) => h('li', {}, link('group', {topic: t.name, group: g}, g))))
      : h('p', {}, 'No group reads it.'));
}
