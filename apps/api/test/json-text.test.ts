import { describe, expect, it } from '@jest/globals';
import express, { type Express } from 'express';
import request from 'supertest';
import { sendJsonText } from '../src/http/json-text.js';

/** Headers that must match, in the form the client sees them (Date and Connection left out). */
function compared(headers: Record<string, string | string[] | undefined>) {
  const { date: _date, connection: _connection, 'keep-alive': _keepAlive, ...rest } = headers;
  return rest;
}

const BODY = { data: { sites: [{ id: 'site_1', name: 'Café "quoted" \\ </script>', emoji: '🙂', pad: 'x'.repeat(1200) }] } };

/** Two routes answering the same object: one with res.json, one with the text through sendJsonText. */
function appLike(setup: (app: Express) => void = () => undefined): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  setup(app);
  app.get('/json', (_req, res) => {
    res.json(BODY);
  });
  app.get('/text', (_req, res) => {
    sendJsonText(res, JSON.stringify(BODY));
  });
  return app;
}

async function both(app: Express, method: 'get' | 'head', headers: Record<string, string> = {}) {
  const send = (path: string) => {
    const req = method === 'get' ? request(app).get(path) : request(app).head(path);
    for (const [name, value] of Object.entries(headers)) req.set(name, value);
    return req.buffer(true).parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
  };
  const [viaJson, viaText] = await Promise.all([send('/json'), send('/text')]);
  return { viaJson, viaText };
}

describe('sendJsonText answers exactly as res.json would', () => {
  it('gives a GET the same status, headers and bytes, non-ASCII and a body over 1,000 characters included', async () => {
    const { viaJson, viaText } = await both(appLike(), 'get');
    expect(viaText.status).toBe(200);
    expect(viaText.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Number(viaText.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(BODY)));
    expect(compared(viaText.headers)).toEqual(compared(viaJson.headers));
    expect((viaText.body as Buffer).equals(viaJson.body as Buffer)).toBe(true);
    expect(JSON.parse((viaText.body as Buffer).toString('utf8'))).toEqual(BODY);
  });

  it('gives a HEAD the same headers, Content-Length of the body included, and no body', async () => {
    const { viaJson, viaText } = await both(appLike(), 'head');
    expect(viaText.status).toBe(200);
    expect(compared(viaText.headers)).toEqual(compared(viaJson.headers));
    expect(Number(viaText.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(BODY)));
    expect((viaText.body as Buffer | undefined)?.length ?? 0).toBe(0);
  });

  it.each([
    ['If-None-Match: *', { 'If-None-Match': '*' }],
    ['If-None-Match with a tag', { 'If-None-Match': '"abc"' }],
    ['If-Modified-Since', { 'If-Modified-Since': new Date().toUTCString() }],
  ])('answers a conditional GET (%s) as res.json does', async (_label, headers) => {
    const { viaJson, viaText } = await both(appLike(), 'get', headers);
    expect(viaText.status).toBe(viaJson.status);
    expect(compared(viaText.headers)).toEqual(compared(viaJson.headers));
    expect((viaText.body as Buffer).equals(viaJson.body as Buffer)).toBe(true);
  });

  it('keeps a Content-Type or status set before it, and ETags when the app generates them', async () => {
    const typed = appLike((app) =>
      app.use((_req, res, next) => {
        res.status(201).set('Content-Type', 'application/problem+json');
        next();
      }),
    );
    const typedAnswers = await both(typed, 'get');
    expect(typedAnswers.viaText.status).toBe(201);
    expect(typedAnswers.viaText.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(compared(typedAnswers.viaText.headers)).toEqual(compared(typedAnswers.viaJson.headers));

    const tagged = appLike((app) => app.set('etag', 'strong'));
    const taggedAnswers = await both(tagged, 'get');
    expect(taggedAnswers.viaText.headers.etag).toMatch(/^"/);
    expect(compared(taggedAnswers.viaText.headers)).toEqual(compared(taggedAnswers.viaJson.headers));
  });
});
