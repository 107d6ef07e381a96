export declare const root: string;
export declare const bundlePath: string;
export declare function buildWorker(target?: { entry?: string; outfile?: string }): Promise<string>;
