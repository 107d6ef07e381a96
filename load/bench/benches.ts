/** Every benchmark, in the order `npm run bench` lists them. */
import type { Bench } from "../src/kit/bench";
import broadcast from "./broadcast";
import broadcastIdle from "./broadcast-idle";
import compare from "./compare";
import cursor from "./cursor";
import endlessUpload from "./endless-upload";
import faultSoak from "./fault-soak";
import handshakeProfile from "./handshake-profile";
import history from "./history";
import hookSeam from "./hook-seam";
import multiplex from "./multiplex";
import newRooms from "./new-rooms";
import presence from "./presence";
import pressure from "./pressure";
import publish from "./publish";
import publishBatch from "./publish-batch";
import publishProfile from "./publish-profile";
import pusher from "./pusher";
import roomsChurn from "./rooms-churn";
import runtimeFloor from "./runtime-floor";
import sharded from "./sharded";
import storageCost from "./storage-cost";
import webhooks from "./webhooks";


export const BENCHES: readonly Bench[] = [compare, runtimeFloor, multiplex, sharded, hookSeam, pusher, publish, publishBatch, publishProfile, handshakeProfile, newRooms, storageCost, endlessUpload, broadcast, broadcastIdle, presence, webhooks, history, cursor, roomsChurn, pressure, faultSoak];
