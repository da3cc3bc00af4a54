import * as prettier from 'prettier';

/**
 * Formats a generated file the way `npm run lint` (prettier --check) expects, with the repository's
 * prettier config, so a bench run never leaves the tree failing the lint. Falls back to the text as
 * it is when prettier has no parser for the file.
 */
export async function formatLikeRepo(text: string, file: string): Promise<string> {
  const info = await prettier.getFileInfo(file);
  if (!info.inferredParser) return text;
  const config = (await prettier.resolveConfig(file)) ?? {};
  return prettier.format(text, { ...config, filepath: file });
}
