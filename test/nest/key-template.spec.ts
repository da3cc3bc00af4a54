import { LockKeyError } from '../../lib';
import { Args, Mutation, Query, ResolveField, Resolver } from '@nestjs/graphql';
import {
  compileLockSpec,
  graphqlKeyArgs,
  handlerTypeOf,
  keyFunctionResult,
  MAX_NAME_BYTES,
  parseKeyTemplate,
  renderKeyTemplate,
} from '../../lib/internal';

describe('key templates', () => {
  it('renders placeholders over the request, the message or the arguments', () => {
    const request = { params: { id: 42 }, query: { v: 'x' }, headers: { 'x-tenant': 't1' }, user: { id: 'u' } };
    expect(renderKeyTemplate(parseKeyTemplate('a:{params.id}:{query.v}:{headers.X-Tenant}:{user.id}'), request)).toBe(
      'a:42:x:t1:u',
    );
    expect(renderKeyTemplate(parseKeyTemplate('m:{data.order.id}'), { data: { order: { id: 'o' } } })).toBe('m:o');
    const args = [{ id: 1 }, 'two', true];
    expect(renderKeyTemplate(parseKeyTemplate('{0.id}/{1}/{args.2}'), { args })).toBe('1/two/true');
    expect(renderKeyTemplate(parseKeyTemplate('static-name'), {})).toBe('static-name');
    expect(renderKeyTemplate(parseKeyTemplate('{{literal}}:{0}'), { args: ['v'] })).toBe('{literal}:v');
  });

  it('inserts values verbatim: the engine encodes braces so they cannot leave the hash tag', () => {
    expect(renderKeyTemplate(parseKeyTemplate('a:{0}'), { args: ['x}{y'] })).toBe('a:x}{y');
  });

  it.each([
    ['', /empty/],
    ['a:{params.id', /unclosed "\{" at position 2/],
    ['a:}', /unmatched "\}" at position 2/],
    ['a:{}', /not a dotted path/],
    ['a:{params..id}', /not a dotted path/],
    ['a:{params.id x}', /not a dotted path/],
    ['a:{cookies.sid}', /unknown source/],
  ])('rejects the template %j', (template, message) => {
    expect(() => parseKeyTemplate(template)).toThrow(message);
  });

  it.each([
    [{}, 'missing'],
    [{ params: {} }, 'missing'],
    [{ params: { id: '' } }, 'empty'],
    [{ params: { id: null } }, 'missing'],
    [{ params: { id: ['1', '2'] } }, 'an array'],
    [{ params: { id: { a: 1 } } }, 'an object'],
    [{ params: { id: Number.NaN } }, 'NaN'],
  ])('refuses %j for {params.id} with LockKeyError', (sources, words) => {
    const render = () => renderKeyTemplate(parseKeyTemplate('article:{params.id}'), sources);
    expect(render).toThrow(LockKeyError);
    expect(render).toThrow(new RegExp(words === 'empty' ? 'missing or empty' : words));
  });

  it('does not read inherited properties', () => {
    expect(() => renderKeyTemplate(parseKeyTemplate('{params.constructor}'), { params: {} })).toThrow(LockKeyError);
    expect(() => renderKeyTemplate(parseKeyTemplate('{0.toString}'), { args: [{}] })).toThrow(LockKeyError);
  });

  it('bounds the name length and checks what key functions return', () => {
    const long = 'x'.repeat(MAX_NAME_BYTES);
    expect(() => renderKeyTemplate(parseKeyTemplate('a:{0}'), { args: [long] })).toThrow(/limit is 1024 bytes/);
    expect(keyFunctionResult(5)).toBe('5');
    expect(() => keyFunctionResult('')).toThrow(LockKeyError);
    expect(() => keyFunctionResult(undefined)).toThrow(/returned undefined/);
  });
});

describe('@DistributedLock option validation', () => {
  it('lists every problem, naming the class and method', () => {
    const compile = () =>
      compileLockSpec(
        { key: 'a:{params.id', waitTime: -1, leaseTime: 0, kind: 'spin', wait: 1 },
        'OrdersController.update',
        'http',
      );
    expect(compile).toThrow(/@DistributedLock\(\) on OrdersController\.update is invalid/);
    for (const problem of [
      /unknown option "wait"/,
      /unclosed/,
      /waitTime must be a number of milliseconds >= 0/,
      /leaseTime/,
      /kind/,
    ]) {
      expect(compile).toThrow(problem);
    }
  });

  it('checks that placeholders fit how the method is called', () => {
    expect(() => compileLockSpec({ key: '{params.id}' }, 'Jobs.run')).toThrow(/cannot be used on a method that is not/);
    expect(() => compileLockSpec({ key: '{0}' }, 'Orders.get', 'http')).toThrow(/an HTTP route handler/);
    expect(() => compileLockSpec({ key: '{data.id}' }, 'Orders.get', 'http')).toThrow(/\{params…\}/);
    expect(compileLockSpec({ key: '{data.id}' }, 'Events.on', 'ws').handlerType).toBe('ws');
    expect(() => compileLockSpec({ key: '{data.id}' }, 'Posts.update', 'graphql')).toThrow(
      /a GraphQL resolver.*\{args…\}/,
    );
    expect(compileLockSpec({ key: 'post:{args.id}' }, 'Posts.update', 'graphql').handlerType).toBe('graphql');
  });

  it('knows GraphQL resolvers, @ResolveField included, as handlers', () => {
    @Resolver()
    class Posts {
      @Query(() => String)
      post(@Args('id') id: string) {
        return id;
      }
      @Mutation(() => String)
      update(@Args('id') id: string) {
        return id;
      }
      @ResolveField(() => String)
      author() {
        return '';
      }
      helper() {
        return '';
      }
    }
    const p = Posts.prototype;
    expect([p.post, p.update, p.author, p.helper].map((m) => handlerTypeOf(m))).toEqual([
      'graphql',
      'graphql',
      'graphql',
      undefined,
    ]);
  });

  it("reads a resolver's GraphQL arguments by name and its handler arguments by index", () => {
    const template = parseKeyTemplate('post:{args.id}:{args.1.id}:{args.0.author}:{2.tenant}');
    const args = graphqlKeyArgs([{ author: 'ann' }, { id: 7 }, { tenant: 't1' }, {}]);
    expect(renderKeyTemplate(template, { args })).toBe('post:7:7:ann:t1');
    expect(() => renderKeyTemplate(parseKeyTemplate('{args.id}'), { args: graphqlKeyArgs([{}, {}]) })).toThrow(
      LockKeyError,
    );
  });

  it('resolves kind, fair and the special times', () => {
    expect(compileLockSpec({ key: 'k', fair: true }, 'A.b')).toMatchObject({ kind: 'fair', newScope: false });
    expect(compileLockSpec({ key: 'k', waitTime: Infinity, leaseTime: 'watchdog' }, 'A.b')).toMatchObject({
      kind: 'reentrant',
      waitTime: Infinity,
      leaseTime: 'watchdog',
    });
    expect(() => compileLockSpec({ key: 'k', fair: true, kind: 'simple' }, 'A.b')).toThrow(/contradicts/);
    expect(() => compileLockSpec({ key: 42 }, 'A.b')).toThrow(/key must be a template string or a function/);
  });
});
