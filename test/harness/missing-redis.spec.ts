/** Without redis-server on PATH, starting a topology fails at once with what to do about it. */
import { startTopology } from '../../scripts/redis-topology';
import { PRIVATE_PORTS } from '../../scripts/test-ports';

describe('harness: redis-server missing', () => {
  const path = process.env.PATH;
  afterEach(() => {
    process.env.PATH = path;
  });

  it('tells the user to run "npm run setup"', async () => {
    process.env.PATH = '/nonexistent';
    await expect(startTopology('single', { basePort: PRIVATE_PORTS.harnessMissingRedis.base })).rejects.toThrow(
      'redis-server not found: run "npm run setup" (installs the Debian packages redis-server and redis-tools) or install Redis >= 7 yourself',
    );
  });
});
