// Consumer groups: a page at a time, searchable; one group's members, assignment and epochs,
// committed offsets and lag per queue, rebalances; and, when the console allows actions, reset
// and delete, each confirmed by typing the group's name.
import {h, fill, kv, table, link, num, time, duration, errorBox, localInput} from './dom.js';
import {api, post, session, navigate} from './api.js';
import {searchForm, field} from './topics.js';

export async function groups(main, params) {
  const q = params.q || '';
  const res = await api('groups', {q, after: params.after, limit: params.limit});
  const rows = res.groups.map((g) => ({
    attrs: {dataset: {group: g.group, topic: g.topic}},
    cells: [link('group', {topic: g.topic, group: g.group}, g.group), link('topic', {topic: g.topic}, g.topic),
      num(g.members), num(g.lag_messages), g.lag_ms ? duration(g.lag_ms) : '–', state(g)],
  }));
  fill(main,
    h('h1', {}, 'Consumer groups'),
    searchForm('groups', [field('Group or topic contains', h('input', {name: 'q', value: q, type: 'search', id: 'group-q'}))]),
    h('p', {class: 'count', id: 'groups-count'}, `${num(res.total)} group${res.total === 1 ? '' : 's'}${q ? ' match' : ''}`),
    table('groups-table', ['Group', 'Topic', 'Members', 'Lag (messages)', 'Lag (time)', 'State'], rows, 'No group.'),
    h('nav', {class: 'pager'}, params.after ? link('groups', {q}, '« first page') : null,
      res.next ? link('groups', {q, after: res.next}, 'next page »') : null));
}

function state(g) {
  if (g.members === 0) return 'no members';
  return g.rebalancing ? 'rebalancing' : 'stable';
}

export async function group(main, params) {
  const key = {topic: params.topic || '', group: params.group || ''};
  let g;
  try {
    g = await api('group', key);
  } catch (err) {
    fill(main, h('h1', {}, 'Group ', h('code', {}, key.group)), errorBox(err));
    return;
  }
  const rb = g.rebalance_under_way;
  fill(main,
    h('h1', {}, 'Group ', h('code', {id: 'group-name'}, g.group), ' on ', link('topic', {topic: g.topic}, g.topic)),
    kv([
      ['State', state(g)],
      ['Members', num(g.members)],
      ['Lag', `${num(g.lag_messages)} messages, ${g.lag_ms ? duration(g.lag_ms) : 'none'} behind`],
      g.subject ? ['Subject filter', g.subject] : null,
      ['Redelivered', num(g.redelivered)],
      rb ? ['Rebalance under way', `${rb.reason} ${rb.member || ''} since ${time(rb.start_ms)}`] : null,
    ]),
    h('h2', {}, 'Members'),
    table('members-table', ['Member', 'Client', 'Joined', 'Queues'],
      g.members_list.map((m) => [h('code', {}, m.id), m.client, time(m.joined_ms), m.queues.join(', ') || '–']), 'No member now.'),
    h('h2', {}, 'Queues'),
    table('group-queues-table', ['Queue', 'Owner', 'Epoch', 'Committed', 'Min', 'Max', 'Lag (messages)', 'Lag (time)'],
      g.queues.map((q) => [num(q.queue_id), q.owner ? h('code', {}, q.owner + (q.revoking ? ' (releasing)' : '')) : '–',
        q.epoch ? String(q.epoch) : '–', q.committed < 0 ? 'none' : num(q.committed), num(q.min_offset), num(q.max_offset),
        num(q.lag_messages), q.lag_ms ? duration(q.lag_ms) : '–'])),
    h('h2', {}, 'Recent rebalances'),
    table('rebalances-table', ['Started', 'Why', 'Member', 'Took', 'Queues moved', 'Redelivered'],
      g.rebalances.map((r) => [time(r.start_ms), r.reason, r.member || '–', duration(r.duration_ms), num(r.moved), num(r.redelivered)]),
      'None since the engine started.'),
    actions(g));
}

// actions are the reset and delete forms, or why there are none.
function actions(g) {
  if (!session.actions) {
    return h('p', {class: 'note', id: 'read-only'}, 'Read-only: resetting and deleting groups is off (console_actions).');
  }
  const to = h('select', {name: 'to', id: 'reset-to'},
    h('option', {value: 'earliest'}, 'the earliest message kept'),
    h('option', {value: 'latest'}, 'the end (skip everything)'),
    h('option', {value: 'time'}, 'a time'),
    h('option', {value: 'offset'}, 'an offset'));
  const at = h('input', {type: 'datetime-local', step: 0.001, id: 'reset-time', value: localInput(Date.now() - 3600e3)});
  const off = h('input', {type: 'number', min: 0, id: 'reset-offset', value: 0});
  const result = h('p', {id: 'action-result', role: 'status'});
  const busy = g.members > 0 ? h('p', {class: 'note'}, 'The group has members: they must stop (commit and leave) before its offsets change.') : null;
  const reset = h('button', {type: 'button', id: 'reset-button'}, 'Reset offsets…');
  const del = h('button', {type: 'button', id: 'delete-button', class: 'danger'}, 'Delete group…');
  reset.addEventListener('click', async () => {
    const body = {topic: g.topic, group: g.group, to: to.value};
    if (to.value === 'time') {
      body.time = new Date(at.value).getTime();
      if (!Number.isFinite(body.time)) return void fill(result, 'Give a time to reset to.');
    }
    if (to.value === 'offset') {
      // Number('') is 0: an empty field would reset to 0 while the question showed no offset.
      body.offset = off.value.trim() === '' ? NaN : Number(off.value);
      if (!Number.isSafeInteger(body.offset) || body.offset < 0) return void fill(result, 'Give an offset, a whole number from 0.');
    }
    const what = to.value === 'time' ? 'the first message at or after ' + at.value : to.value === 'offset' ? 'offset ' + body.offset : to.value;
    if (!(await confirmAction(`Reset the offsets of group “${g.group}” on ${g.topic} to ${what}?`, g.group))) return;
    await act(result, 'group/reset', body, (r) => 'Reset: ' + r.queues.map((q) => `queue ${q.queue_id} → ${q.offset}`).join(', '));
  });
  del.addEventListener('click', async () => {
    if (!(await confirmAction(`Delete the offsets of group “${g.group}” on ${g.topic}? Its members would start again from the start policy.`, g.group))) return;
    await act(result, 'group/delete', {topic: g.topic, group: g.group}, (r) => (r.deleted ? 'Deleted.' : 'It had no offsets.'), () => navigate('/console/groups'));
  });
  return h('section', {class: 'card', id: 'group-actions'}, h('h2', {}, 'Actions'), busy,
    h('div', {class: 'search'}, field('Reset to', to), field('Time', at), field('Offset', off), reset), h('div', {}, del), result);
}

async function act(result, path, body, say, after) {
  fill(result, 'Working…');
  try {
    const r = await post(path, body);
    fill(result, say(r));
    result.className = 'ok';
    if (after) setTimeout(after, 800);
  } catch (err) {
    result.className = 'error';
    fill(result, err.message);
  }
}

// confirmAction asks in a dialog; the action goes ahead only once the group's name is typed.
function confirmAction(question, name) {
  const dlg = document.getElementById('confirm');
  const input = h('input', {id: 'confirm-input', autocomplete: 'off'});
  const ok = h('button', {type: 'submit', id: 'confirm-ok', class: 'danger', disabled: true}, 'Confirm');
  input.addEventListener('input', () => (ok.disabled = input.value !== name));
  const cancel = h('button', {type: 'button', id: 'confirm-cancel'}, 'Cancel');
  fill(dlg, h('form', {method: 'dialog'}, h('p', {}, question), field('Type the group name to confirm', input),
    h('p', {class: 'buttons'}, cancel, ok)));
  return new Promise((resolve) => {
    cancel.addEventListener('click', () => dlg.close('cancel'));
    dlg.addEventListener('close', () => resolve(dlg.returnValue === 'confirm' && input.value === name), {once: true});
    ok.addEventListener('click', (ev) => {
      ev.preventDefault();
      dlg.close('confirm');
    });
    dlg.returnValue = '';
    dlg.showModal();
    input.focus();
  });
}
